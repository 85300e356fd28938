package cluster

// Cluster keys. A node proves itself to its peers, and seals receipt
// handles, with one key (Config.Key); it may also accept others
// (Config.AcceptKeys), so that the key can be rotated with no downtime,
// by three rolling restarts (docs/operations.md, "Rotating the cluster
// key"): every node accepts the new key, then every node proves itself
// with it and accepts the old one, then the old one is dropped.
//
// Invariants:
//  1. A node proves itself (its handshake MAC, transport.go) and seals
//     receipt handles only with Key. An accepted key is never used to
//     sign or seal anything.
//  2. It takes a peer whose handshake MAC verifies under Key or under any
//     accepted key, and a receipt handle whose check verifies under the
//     secret derived from any of them (engine Options.AcceptHandleSecrets).
//  3. Without AcceptKeys a node behaves as with one key: a peer or a
//     handle of any other key is refused.
//
// A peer that proved an accepted key, not this node's own, is logged at
// Info once per connection: until the rotation ends, the operator sees
// which nodes are not on the new key yet.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
)

// macWith is the handshake MAC of label, both nonces and both ids under key.
func macWith(key []byte, label byte, n1, n2 []byte, a, b uint64) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte{label})
	m.Write(n1)
	m.Write(n2)
	var ids [16]byte
	binary.LittleEndian.PutUint64(ids[:], a)
	binary.LittleEndian.PutUint64(ids[8:], b)
	m.Write(ids[:])
	return m.Sum(nil)
}

// mac is this node's handshake MAC (invariant 1: its own key only).
func (t *transport) mac(label byte, n1, n2 []byte, a, b uint64) []byte {
	return macWith(t.key, label, n1, n2, a, b)
}

// verifyMAC reports whether got is a handshake MAC under this node's key
// or an accepted one, and whether it was under an accepted one.
func (t *transport) verifyMAC(got []byte, label byte, n1, n2 []byte, a, b uint64) (ok, accepted bool) {
	if hmac.Equal(got, t.mac(label, n1, n2, a, b)) {
		return true, false
	}
	for _, k := range t.acceptKeys {
		if hmac.Equal(got, macWith(k, label, n1, n2, a, b)) {
			return true, true
		}
	}
	return false, false
}

// handleSecret derives a shard's receipt-handle key from the cluster key:
// every member of the shard issues and accepts the same handles.
func (n *Node) handleSecret(shard int) []byte { return handleSecretOf(n.cfg.Key, shard) }

// acceptedHandleSecrets are the handle keys of the accepted cluster keys
// (invariant 2); nil without them.
func (n *Node) acceptedHandleSecrets(shard int) [][]byte {
	var out [][]byte
	for _, k := range n.cfg.AcceptKeys {
		out = append(out, handleSecretOf(k, shard))
	}
	return out
}

func handleSecretOf(key []byte, shard int) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("smqd receipt handles"))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(shard))
	m.Write(b[:])
	return m.Sum(nil)
}
