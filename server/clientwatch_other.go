//go:build !linux

package server

import "syscall"

// canWatchPeer: elsewhere a client's close is not looked for
// (clientwatch.go, invariant 3).
const canWatchPeer = false

func peerClosed(syscall.RawConn) bool { return false }
