package envflag

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("data-dir", "def", "")
	listen := fs.String("listen", "def", "")
	n := fs.Int("n", 1, "")
	quiet := fs.Bool("quiet", false, "")
	if err := fs.Parse([]string{"--listen", "cli"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"P_DATA_DIR": "env", "P_LISTEN": "env", "P_N": "7"}
	set, err := Apply(fs, "P_", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if *dir != "env" || *listen != "cli" || *n != 7 || *quiet {
		t.Fatalf("data-dir %q listen %q n %d quiet %v", *dir, *listen, *n, *quiet)
	}
	if !set["data-dir"] || !set["listen"] || !set["n"] || set["quiet"] {
		t.Fatalf("set %v", set)
	}

	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.Int("n", 1, "")
	_ = fs2.Parse(nil)
	if _, err := Apply(fs2, "P_", func(string) string { return "x" }); err == nil || !strings.Contains(err.Error(), "P_N=") {
		t.Fatalf("bad value: %v", err)
	}
}
