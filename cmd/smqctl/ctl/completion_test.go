package ctl

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The completion scripts are real shell: bash and zsh parse them (-n), and
// bash, with the script sourced and a stub smqctl for the names,
// completes commands, verbs and queue, topic and subscription names.
func TestCompletionScriptsParse(t *testing.T) {
	c := &ctl{t: t, dir: t.TempDir(), env: map[string]string{}}
	script := func(shell string) string {
		p := filepath.Join(t.TempDir(), "smqctl."+shell)
		if err := os.WriteFile(p, []byte(c.ok("completion", shell)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shellRun := func(t *testing.T, shell string, args ...string) string {
		t.Helper()
		out, err := exec.Command(shell, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", shell, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	t.Run("bash", func(t *testing.T) {
		bash, err := exec.LookPath("bash")
		if err != nil {
			t.Skip("bash is not installed: the bash completion script is not checked")
		}
		p := script("bash")
		shellRun(t, bash, "-n", p)
		// complete WORDS...: what _smqctl offers for the last word.
		complete := func(words ...string) string {
			prog := `smqctl() {
  case "$*" in
    "queue ls --quiet") printf 'orders\nemails\n' ;;
    "topic ls --quiet") printf 'news\nalerts\n' ;;
    "subscription ls news --quiet") printf 'hook\nto-inbox\n' ;;
    "--endpoint 127.0.0.1:1 queue ls --quiet") printf 'far\n' ;;
    "--endpoint=127.0.0.1:1 queue ls --quiet") printf 'far2\n' ;;
    "--credentials-file creds --timeout 5 queue ls --quiet") printf 'keyed\n' ;;
  esac
}
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
_smqctl
printf '%s\n' "${COMPREPLY[*]}"`
			return strings.TrimSpace(shellRun(t, bash, append([]string{"-c", prog, "complete", p}, words...)...))
		}
		for _, tc := range []struct {
			words []string
			want  string
		}{
			{[]string{"smqctl", "q"}, "queue"},
			{[]string{"smqctl", "queue", ""}, "create get ls purge redrive rm set"},
			{[]string{"smqctl", "message", "de"}, "delete"},
			{[]string{"smqctl", "send", "o"}, "orders"},
			{[]string{"smqctl", "queue", "rm", ""}, "orders emails"},
			{[]string{"smqctl", "completion", "z"}, "zsh"},
			{[]string{"smqctl", "t"}, "topic"},
			{[]string{"smqctl", "s"}, "subscription send stats"},
			{[]string{"smqctl", "topic", ""}, "create get ls publish rm set"},
			{[]string{"smqctl", "topic", "publish", "n"}, "news"},
			{[]string{"smqctl", "topic", "create", ""}, ""},
			{[]string{"smqctl", "subscription", ""}, "create get ls rm set"},
			{[]string{"smqctl", "subscription", "get", ""}, "news alerts"},
			{[]string{"smqctl", "subscription", "rm", "news", "t"}, "to-inbox"},
			{[]string{"smqctl", "subscription", "set", "--json", "news", ""}, "hook to-inbox"},
			{[]string{"smqctl", "subscription", "create", "news", ""}, ""},
			{[]string{"smqctl", "cluster", ""}, "add rm status"},
			// A flag's value is not the command, and the connection flags
			// reach the name lists (console audit, 2026-12-06).
			{[]string{"smqctl", "--endpoint", "127.0.0.1:1", "que"}, "queue"},
			{[]string{"smqctl", "--endpoint", "127.0.0.1:1", "queue", "get", ""}, "far"},
			// COMP_LINE as typed: bash also splits COMP_WORDS at ':' and '='
			// (review G), which the script no longer reads.
			{[]string{"smqctl", "--endpoint=127.0.0.1:1", "queue", "get", ""}, "far2"},
			{[]string{"smqctl", "queue", "get", "--credentials-file", "creds", "--timeout", "5", ""}, "keyed"},
		} {
			if got := complete(tc.words...); got != tc.want {
				t.Errorf("completing %q: %q, want %q", tc.words, got, tc.want)
			}
		}
	})
	t.Run("zsh", func(t *testing.T) {
		zsh, err := exec.LookPath("zsh")
		if err != nil {
			t.Skip("zsh is not installed: the zsh completion script is not checked (apt-get install zsh)")
		}
		shellRun(t, zsh, "-n", script("zsh"))
	})
}
