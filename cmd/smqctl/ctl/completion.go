package ctl

import (
	"context"
	"flag"
	"fmt"
	"strings"
)

func (r *run) completion(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("completion bash|zsh", flag.ContinueOnError)
	pos, err := r.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	verbs := map[string]string{}
	for g := range groups() {
		if g != "" {
			verbs[g] = strings.Join(verbNames(g), " ")
		}
	}
	top := []string{"queue", "message", "cluster", "send", "receive", "peek", "stats", "completion", "help"}
	switch pos[0] {
	case "bash":
		fmt.Fprintf(r.env.Stdout, bashCompletion, strings.Join(top, " "), verbs["queue"], verbs["message"])
	case "zsh":
		fmt.Fprintf(r.env.Stdout, zshCompletion, strings.Join(top, " "), verbs["queue"], verbs["message"])
	default:
		return usagef("completion: want bash or zsh, not %q", pos[0])
	}
	return nil
}

// The scripts complete commands and verbs, flags, and queue names (asked
// of the server with "smqctl queue ls --quiet", silently).
const bashCompletion = `# bash completion for smqctl: source <(smqctl completion bash)
_smqctl() {
  local cur=${COMP_WORDS[COMP_CWORD]} words=("${COMP_WORDS[@]:1:COMP_CWORD-1}") cmd="" verb="" w
  for w in "${words[@]}"; do
    case $w in -*) ;; *) if [ -z "$cmd" ]; then cmd=$w; elif [ -z "$verb" ]; then verb=$w; fi ;; esac
  done
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(smqctl $cmd $verb -h 2>/dev/null | sed -n 's/^  \(-[a-z-]*\).*/-\1/p')" -- "$cur"))
    return
  fi
  case $cmd in
    "") COMPREPLY=($(compgen -W "%s" -- "$cur")) ;;
    queue) if [ -z "$verb" ]; then COMPREPLY=($(compgen -W "%s" -- "$cur")); else COMPREPLY=($(compgen -W "$(smqctl queue ls --quiet 2>/dev/null)" -- "$cur")); fi ;;
    message) if [ -z "$verb" ]; then COMPREPLY=($(compgen -W "%s" -- "$cur")); else COMPREPLY=($(compgen -W "$(smqctl queue ls --quiet 2>/dev/null)" -- "$cur")); fi ;;
    send|receive|peek|stats) COMPREPLY=($(compgen -W "$(smqctl queue ls --quiet 2>/dev/null)" -- "$cur")) ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
  esac
}
complete -F _smqctl smqctl
`

const zshCompletion = `#compdef smqctl
# zsh completion for smqctl: smqctl completion zsh > "${fpath[1]}/_smqctl"
_smqctl() {
  local -a top queue message queues
  top=(%s)
  queue=(%s)
  message=(%s)
  local -a words_=(${words[2,CURRENT-1]:#-*})
  case ${#words_} in
    0) _describe command top ;;
    1)
      case ${words_[1]} in
        queue) _describe verb queue ;;
        message) _describe verb message ;;
        completion) _values shell bash zsh ;;
        *) queues=(${(f)"$(smqctl queue ls --quiet 2>/dev/null)"}); _describe queue queues ;;
      esac ;;
    *) queues=(${(f)"$(smqctl queue ls --quiet 2>/dev/null)"}); _describe queue queues ;;
  esac
}
_smqctl "$@"
`
