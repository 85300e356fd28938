//go:build !linux

package chaos

import "os/exec"

// orphanProof: only Linux can tie a child's life to its parent's.
func orphanProof(*exec.Cmd) {}
