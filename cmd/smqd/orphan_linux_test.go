//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// orphanProof makes the kernel kill a daemon the test started when the
// test binary dies (a timeout, a closed pipe to `| head`): it left whole
// clusters running otherwise.
func orphanProof(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
