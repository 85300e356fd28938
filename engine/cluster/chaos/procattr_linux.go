//go:build linux

package chaos

import (
	"os/exec"
	"syscall"
)

// orphanProof makes the kernel kill a node when the process that started
// it dies (a test binary killed by its timeout leaves no node behind).
func orphanProof(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
