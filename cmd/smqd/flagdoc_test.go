package main

// docs/operations.md, "Flags and environment", says what every flag of
// smqd is, its variable and its default. This test holds the tables there
// to the flag set: every flag has a row (but for the fault-test flags),
// under its variable, with the default the flag set has. (The docs' table
// had drifted: the sixteen cluster flags had no row; tour audit,
// 2026-12-06.)

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// undocumentedFlags are left out of the operator's tables on purpose.
var undocumentedFlags = map[string]bool{
	"clock-offset": true, // fault tests only
}

type usageFlag struct{ name, def string }

// usageFlags reads smqd's flags and their defaults from its -h output.
func usageFlags(t *testing.T) map[string]usageFlag {
	t.Helper()
	var out bytes.Buffer
	if _, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &out); err == nil {
		t.Fatal("parseConfig -h: no error")
	}
	flags := map[string]usageFlag{}
	nameRE := regexp.MustCompile(`^  -([a-z0-9-]+)`)
	defRE := regexp.MustCompile(`\(default "?([^")]*)"?\)\s*$`)
	var cur string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if m := nameRE.FindStringSubmatch(line); m != nil {
			cur = m[1]
			flags[cur] = usageFlag{name: cur}
			continue
		}
		if cur != "" {
			if m := defRE.FindStringSubmatch(line); m != nil {
				f := flags[cur]
				f.def = m[1]
				flags[cur] = f
			}
		}
	}
	if len(flags) < 40 {
		t.Fatalf("read only %d flags from -h:\n%s", len(flags), out.String())
	}
	return flags
}

type docRow struct {
	line      int
	envs, def string
}

// docFlagRows reads the rows of every table under "## Flags and
// environment" in docs/operations.md whose first cell names flags.
func docFlagRows(t *testing.T) map[string]docRow {
	t.Helper()
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]docRow{}
	in := false
	flagRE := regexp.MustCompile("`--([a-z0-9-]+)`")
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## Flags and environment"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 4 {
			t.Fatalf("operations.md:%d: a flag row with %d cells", i+1, len(cells))
		}
		for _, m := range flagRE.FindAllStringSubmatch(cells[0], -1) {
			rows[m[1]] = docRow{line: i + 1, envs: cells[1], def: cells[2]}
		}
	}
	return rows
}

// sameDefault compares a table's default cell with the flag set's.
func sameDefault(doc, flag string) bool {
	doc = strings.TrimSpace(doc)
	if flag == "" && strings.Contains(doc, "<") {
		return true // computed at start: <data-dir>/credentials, <listen address>
	}
	if i := strings.IndexAny(doc, " ("); i > 0 && strings.HasPrefix(doc, "`") {
		doc = doc[:i]
	}
	doc = strings.Trim(doc, "`")
	switch doc {
	case "—", "-", "empty", "— (generated)":
		doc = ""
	}
	if strings.HasPrefix(doc, "empty") || strings.HasPrefix(doc, "—") {
		doc = ""
	}
	if flag == "" && (doc == "false" || doc == "0") {
		return true // a false bool or a zero number prints no default
	}
	if doc == flag {
		return true
	}
	dd, err1 := time.ParseDuration(doc)
	fd, err2 := time.ParseDuration(flag)
	return err1 == nil && err2 == nil && dd == fd
}

func TestOperationsDocListsEveryFlag(t *testing.T) {
	flags := usageFlags(t)
	rows := docFlagRows(t)
	for name, f := range flags {
		if undocumentedFlags[name] {
			continue
		}
		r, ok := rows[name]
		if !ok {
			t.Errorf("--%s (default %q) has no row in docs/operations.md, \"Flags and environment\"", name, f.def)
			continue
		}
		if env := envName(name); !strings.Contains(r.envs, "`"+env+"`") {
			t.Errorf("operations.md:%d: --%s: the variable is %s, the row says %s", r.line, name, env, r.envs)
		}
		// Rows that name two flags (a pair given together) have no single default.
		if strings.Count(r.envs, "`SMQD_") == 1 && !strings.Contains(r.def, "generated") && !sameDefault(r.def, f.def) {
			t.Errorf("operations.md:%d: --%s: the default is %q, the row says %s", r.line, name, f.def, r.def)
		}
	}
	for name, r := range rows {
		if _, ok := flags[name]; !ok {
			t.Errorf("operations.md:%d: --%s is no flag of smqd", r.line, name)
		}
	}
}
