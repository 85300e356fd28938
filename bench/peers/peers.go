package peers

import (
	"fmt"
	"reflect"

	"github.com/smqd/smqd/bench"
)

// catalog's methods are the peers: each peer's file adds one exported
// method that takes nothing and returns its bench.Peer.
type catalog struct{}

// All returns every peer, ordered by the name of its catalog method. It
// panics if a catalog method has another signature (a programming error
// that TestAll catches).
func All() []bench.Peer {
	v := reflect.ValueOf(catalog{})
	peers := make([]bench.Peer, 0, v.NumMethod())
	for i := 0; i < v.NumMethod(); i++ {
		p, ok := v.Method(i).Interface().(func() bench.Peer)
		if !ok {
			panic(fmt.Sprintf("peers: catalog.%s is not a func() bench.Peer", v.Type().Method(i).Name))
		}
		peers = append(peers, p())
	}
	return peers
}
