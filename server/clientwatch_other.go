//go:build !linux

package server

// canWatchPeer: elsewhere a client's close is not looked for
// (clientwatch.go, invariant 3).
const canWatchPeer = false

func peersClosed(fds []int) []bool { return make([]bool, len(fds)) }
