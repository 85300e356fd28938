package engine

// nameIndex is a sorted set of names: the broker's queues, its topics, a
// topic's subscriptions (ListQueues, ListTopics and
// ListSubscriptionByTopic page through them in byte order, page). One sorted slice made a create or delete
// cost a copy of every name after it, and a start-up that met the queues
// out of name order cost O(n) string compares per queue: with 100,000
// queues, minutes. Here the names are kept in sorted chunks of at most
// nameChunkMax names, so an insert or a remove costs two binary searches
// and a copy within one chunk (plus, when a chunk splits or empties, a copy
// of the chunk headers, n/256 of them at most).
//
// Invariants:
//  1. Every chunk is non-empty and sorted; every name of chunk k sorts
//     before every name of chunk k+1; no name appears twice.
//  2. n is the number of names.
//
// Owner: the lock of the set it names (Broker.mu for queues, topicSet.mu
// for topics and subscriptions): written under it exclusively, read under
// it shared.

import (
	"iter"
	"sort"
	"strings"
)

const nameChunkMax = 512

type nameIndex struct {
	chunks [][]string
	n      int
}

// chunkFor returns the index of the chunk where name is or would go: the
// first chunk whose last name is >= name, or the last chunk.
func (x *nameIndex) chunkFor(name string) int {
	c := sort.Search(len(x.chunks), func(k int) bool {
		ch := x.chunks[k]
		return ch[len(ch)-1] >= name
	})
	if c == len(x.chunks) && c > 0 {
		c--
	}
	return c
}

// insert adds name, which must not be present.
func (x *nameIndex) insert(name string) {
	x.n++
	if len(x.chunks) == 0 {
		x.chunks = append(x.chunks, []string{name})
		return
	}
	c := x.chunkFor(name)
	ch := x.chunks[c]
	i := sort.SearchStrings(ch, name)
	ch = append(ch, "")
	copy(ch[i+1:], ch[i:])
	ch[i] = name
	if len(ch) <= nameChunkMax {
		x.chunks[c] = ch
		return
	}
	// Split: the upper half gets its own array, so the halves never share
	// room to grow into.
	h := len(ch) / 2
	upper := append(make([]string, 0, nameChunkMax), ch[h:]...)
	clear(ch[h:])
	x.chunks[c] = ch[:h]
	x.chunks = append(x.chunks, nil)
	copy(x.chunks[c+2:], x.chunks[c+1:])
	x.chunks[c+1] = upper
}

// remove deletes name and reports whether it was present.
func (x *nameIndex) remove(name string) bool {
	if len(x.chunks) == 0 {
		return false
	}
	c := x.chunkFor(name)
	ch := x.chunks[c]
	i := sort.SearchStrings(ch, name)
	if i == len(ch) || ch[i] != name {
		return false
	}
	x.n--
	copy(ch[i:], ch[i+1:])
	ch[len(ch)-1] = ""
	ch = ch[:len(ch)-1]
	if len(ch) > 0 {
		x.chunks[c] = ch
		return true
	}
	copy(x.chunks[c:], x.chunks[c+1:])
	x.chunks[len(x.chunks)-1] = nil
	x.chunks = x.chunks[:len(x.chunks)-1]
	return true
}

// from yields the names >= start, in order.
func (x *nameIndex) from(start string) iter.Seq[string] {
	return func(yield func(string) bool) {
		if len(x.chunks) == 0 {
			return
		}
		c := x.chunkFor(start)
		i := sort.SearchStrings(x.chunks[c], start)
		for ; c < len(x.chunks); c, i = c+1, 0 {
			for _, name := range x.chunks[c][i:] {
				if !yield(name) {
					return
				}
			}
		}
	}
}

// all yields every name, in order.
func (x *nameIndex) all() iter.Seq[string] { return x.from("") }

// page returns up to limit (1..1000, 0 means 1000) names in byte order that
// start with prefix and are >= marker, and the name to pass as marker for
// the next page ("" when there is none). unit names the things listed in
// the range error.
func (x *nameIndex) page(prefix, marker string, limit int, unit string) (names []string, next string, err error) {
	if limit == 0 {
		limit = 1000
	}
	if limit < 1 || limit > 1000 {
		return nil, "", rangeErr("x-mns-ret-number", 1, 1000, unit)
	}
	for n := range x.from(max(prefix, marker)) {
		if !strings.HasPrefix(n, prefix) {
			break
		}
		if len(names) == limit {
			return names, n, nil
		}
		names = append(names, n)
	}
	return names, "", nil
}
