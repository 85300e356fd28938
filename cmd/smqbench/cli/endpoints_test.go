package cli

import (
	"bytes"
	"testing"
)

// TestEndpointsTakeURLs: --endpoints and --addr take smqd's addresses as
// smqctl's --endpoint does (http://host:port), not only as host:port; an
// https one is refused when the flags are read, not once the run began.
func TestEndpointsTakeURLs(t *testing.T) {
	noEnv := func(string) string { return "" }
	c, err := parseConfig([]string{"cycle", "--target", "smqd", "--addr", "http://127.0.0.1:9/",
		"--endpoints", "http://127.0.0.1:1, 127.0.0.1:2,http://127.0.0.1:3/"}, noEnv, &bytes.Buffer{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.endpoints != "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3" || c.addr != "127.0.0.1:9" {
		t.Fatalf("--endpoints %q, --addr %q", c.endpoints, c.addr)
	}
	for _, bad := range []string{"https://127.0.0.1:1", "http://127.0.0.1:1/queues"} {
		if _, err := parseConfig([]string{"cycle", "--target", "smqd", "--endpoints", bad}, noEnv, &bytes.Buffer{}, nil); err == nil {
			t.Errorf("--endpoints %s accepted", bad)
		}
	}
}
