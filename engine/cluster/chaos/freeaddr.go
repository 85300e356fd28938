package chaos

import "github.com/smqd/smqd/engine/cluster/chaos/ports"

// FreeAddr returns a 127.0.0.1 address whose port is free now, outside the
// kernel's range for local ports, and reserved for this process until it
// exits (ports.FreeAddr).
func FreeAddr() (string, error) { return ports.FreeAddr() }
