package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/smqd/smqd/cmd/internal/version"
)

// printJSON writes v as indented JSON.
func (r *run) printJSON(v any) error {
	enc := json.NewEncoder(r.env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows with aligned columns; the first row is the header.
func (r *run) table(rows [][]string) {
	tw := tabwriter.NewWriter(r.env.Stdout, 2, 8, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}

// msTime formats epoch milliseconds.
func msTime(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000Z")
}

// oneLine shortens a body for a table cell: line breaks and tabs shown
// escaped (a tab split the cell into columns of the table), cut at a
// character, not inside one (console audit, 2026-12-06).
func oneLine(s string, max int) string {
	s = strings.NewReplacer("\r", `\r`, "\n", `\n`, "\t", `\t`).Replace(s)
	if len(s) > max {
		cut := max - 1
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "…"
	}
	return s
}

// jsonLine writes v as one line of JSON.
func jsonLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// version prints what this smqctl was built from.
func (r *run) version(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if _, err := r.parse(fs, args, 0, 0); err != nil {
		return err
	}
	in := version.Get()
	if r.g.json {
		return r.printJSON(map[string]any{"revision": in.Revision, "vcs_time": in.Time, "modified": in.Modified, "go_version": in.Go})
	}
	fmt.Fprintln(r.env.Stdout, "smqctl", in)
	return nil
}
