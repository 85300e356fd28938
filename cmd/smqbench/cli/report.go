package cli

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/smqd/smqd/bench"
)

// report aggregates JSON result lines: per label, each target's median
// and spread, and the baseline's ratio to the best peer.
func report(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smqbench report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseline := fs.String("baseline", "smqd", "target whose ratio to the best peer is shown")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var all []bench.Result
	files := fs.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	for _, name := range files {
		var r io.Reader = os.Stdin
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(stderr, "smqbench report:", err)
				return 1
			}
			defer f.Close()
			r = f
		}
		rs, err := bench.ReadResults(r)
		if err != nil {
			fmt.Fprintln(stderr, "smqbench report:", err)
			return 1
		}
		all = append(all, rs...)
	}
	if err := bench.WriteReport(stdout, all, *baseline); err != nil {
		fmt.Fprintln(stderr, "smqbench report:", err)
		return 1
	}
	return 0
}
