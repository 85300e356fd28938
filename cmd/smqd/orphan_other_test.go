//go:build !linux

package main

import "os/exec"

// orphanProof: Pdeathsig is Linux's; elsewhere the test's cleanup alone
// stops the daemons.
func orphanProof(*exec.Cmd) {}
