//go:build !unix

package bench

import "syscall"

// daemonSysProcAttr returns nil: no process group on this system, so a
// console's Ctrl-C reaches the daemon too.
func daemonSysProcAttr() *syscall.SysProcAttr { return nil }
