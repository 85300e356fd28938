// Package envflag lets every flag of a flag.FlagSet be set by an environment
// variable: --data-dir by PREFIX_DATA_DIR. A flag given on the command line
// wins over its variable.
package envflag

import (
	"flag"
	"fmt"
	"strings"
)

// Name returns the environment variable of flag name under prefix.
func Name(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Apply sets every flag of fs (already parsed) that the command line did not
// give from its variable, when that is not empty, and returns the names of
// the flags set either way. A value the flag rejects is an error naming the
// variable.
func Apply(fs *flag.FlagSet, prefix string, getenv func(string) string) (map[string]bool, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		if v := getenv(Name(prefix, f.Name)); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", Name(prefix, f.Name), v, e)
			}
			set[f.Name] = true
		}
	})
	return set, err
}
