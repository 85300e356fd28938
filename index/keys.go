package index

import "encoding/binary"

// Key layout. Part of the on-disk format; never change. See doc.go.
//
//	'm' + name                         broker metadata (opaque value)
//	'p'                                checkpoint position (8 bytes, big-endian)
//	'q' + queueID(8, BE)               queue value (opaque)
//	's' + queueID(8, BE) + seq(8, BE)  message value (opaque)
//	't' + topicID(8, BE)               topic value (opaque)
//	'u' + subscriptionID(8, BE)        subscription value (opaque)
//	'c' + topicID(8, BE)               a topic's publish counts (opaque)
//
// Big-endian integers make byte order equal numeric order, so the messages of
// one queue are contiguous and sorted by seq, and queues are sorted by id.
const (
	prefixMeta     byte = 'm' // part of the on-disk format; never change
	prefixPosition byte = 'p' // part of the on-disk format; never change
	prefixQueue    byte = 'q' // part of the on-disk format; never change
	prefixMessage  byte = 's' // part of the on-disk format; never change
	prefixTopic    byte = 't' // part of the on-disk format; never change
	prefixSub      byte = 'u' // part of the on-disk format; never change
	prefixCount    byte = 'c' // part of the on-disk format; never change

	queueKeyLen   = 1 + 8     // 'q' + queueID
	idKeyLen      = 1 + 8     // 't' + topicID, 'u' + subscriptionID, 'c' + topicID
	messageKeyLen = 1 + 8 + 8 // 's' + queueID + seq
	positionLen   = 8         // value of the 'p' key
)

// MaxMetaNameBytes is the longest metadata name PutMeta accepts; Commit fails
// with ErrKeyTooLarge beyond it. Badger's own limit is 65,000 bytes.
const MaxMetaNameBytes = 1024

// positionKey is the single key holding the checkpoint position. It is built
// on the fly (a one-byte array) so that there is no package-level slice that
// someone could mutate.
func positionKey() []byte { return []byte{prefixPosition} }

// appendMetaKey appends the key of metadata entry name to dst.
func appendMetaKey(dst []byte, name string) []byte {
	dst = append(dst, prefixMeta)
	return append(dst, name...)
}

// appendQueueKey appends the key of queue id to dst.
func appendQueueKey(dst []byte, id uint64) []byte {
	dst = append(dst, prefixQueue)
	return binary.BigEndian.AppendUint64(dst, id)
}

// appendMessageKey appends the key of message (queueID, seq) to dst.
func appendMessageKey(dst []byte, queueID, seq uint64) []byte {
	dst = append(dst, prefixMessage)
	dst = binary.BigEndian.AppendUint64(dst, queueID)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// appendMessagePrefix appends the prefix shared by every message key of
// queueID: 's' + queueID.
func appendMessagePrefix(dst []byte, queueID uint64) []byte {
	dst = append(dst, prefixMessage)
	return binary.BigEndian.AppendUint64(dst, queueID)
}

// parseQueueKey decodes a queue key. ok is false if k is not exactly a queue
// key (wrong prefix or length).
func parseQueueKey(k []byte) (id uint64, ok bool) {
	if len(k) != queueKeyLen || k[0] != prefixQueue {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// parseMessageKey decodes a message key. ok is false if k is not exactly a
// message key.
func parseMessageKey(k []byte) (queueID, seq uint64, ok bool) {
	if len(k) != messageKeyLen || k[0] != prefixMessage {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:]), true
}

// encodePosition returns the 8-byte value stored under the 'p' key.
func encodePosition(pos uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, positionLen), pos)
}

// decodePosition decodes the value of the 'p' key; ok is false if v is not 8
// bytes long (a corrupt store).
func decodePosition(v []byte) (pos uint64, ok bool) {
	if len(v) != positionLen {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// appendIDKey appends the key of object id in the key space prefix ('t'
// topics, 'u' subscriptions).
func appendIDKey(dst []byte, prefix byte, id uint64) []byte {
	dst = append(dst, prefix)
	return binary.BigEndian.AppendUint64(dst, id)
}

// parseIDKey decodes a topic or subscription key of the key space prefix.
func parseIDKey(k []byte, prefix byte) (id uint64, ok bool) {
	if len(k) != idKeyLen || k[0] != prefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}
