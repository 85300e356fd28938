//go:build unix && !linux

package bench

import "syscall"

// daemonSysProcAttr puts the daemon in its own process group, so a
// terminal's Ctrl-C goes to smqbench, which then stops the daemon itself.
// Only Linux can also have it killed when smqbench dies (Pdeathsig).
func daemonSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
