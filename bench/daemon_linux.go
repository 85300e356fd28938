package bench

import "syscall"

// daemonSysProcAttr puts the daemon in its own process group, so a
// terminal's Ctrl-C goes to smqbench, which then stops the daemon itself,
// and has the kernel kill it if smqbench dies first.
func daemonSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
