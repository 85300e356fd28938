package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
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

// oneLine shortens a body for a table cell.
func oneLine(s string, max int) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r", `\r`), "\n", `\n`)
	if len(s) > max {
		return s[:max-1] + "…"
	}
	return s
}

// jsonLine writes v as one line of JSON.
func jsonLine(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
