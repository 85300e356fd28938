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
	top := []string{"queue", "message", "topic", "subscription", "cluster", "send", "receive", "peek", "stats", "backup", "migrate", "completion", "version", "help"}
	lists := []any{strings.Join(top, " "), verbs["queue"], verbs["message"], verbs["topic"], verbs["subscription"], verbs["cluster"]}
	switch pos[0] {
	case "bash":
		fmt.Fprintf(r.env.Stdout, bashCompletion, lists...)
	case "zsh":
		fmt.Fprintf(r.env.Stdout, zshCompletion, lists...)
	default:
		return usagef("completion: want bash or zsh, not %q", pos[0])
	}
	return nil
}

// The scripts complete commands and verbs, flags, and the names of
// queues, topics and subscriptions, asked of the server silently with
// "smqctl queue ls --quiet", "smqctl topic ls --quiet" and "smqctl
// subscription ls TOPIC --quiet".
const bashCompletion = `# bash completion for smqctl: source <(smqctl completion bash)
_smqctl() {
  # The line split at blanks only: COMP_WORDS is split at COMP_WORDBREAKS
  # too (":" and "="), which cut "--endpoint http://h:p" into five words.
  local line=${COMP_LINE:0:COMP_POINT} cur="" cmd="" verb="" w value=""
  local -a words=()
  read -r -a words <<< "$line"
  if [[ $line != *[[:space:]] ]]; then cur=${words[${#words[@]}-1]}; unset 'words[${#words[@]}-1]'; fi
  words=("${words[@]:1}")
  local -a args=() conn=()
  for w in "${words[@]}"; do
    # The connection flags (and their values) go with every name list.
    if [ -n "$value" ]; then conn+=("$w"); value=""; continue; fi
    case $w in
      -endpoint|--endpoint|-access-key-id|--access-key-id|-access-key-secret|--access-key-secret|-credentials-file|--credentials-file|-timeout|--timeout) conn+=("$w"); value=1 ;;
      -endpoint=*|--endpoint=*|-access-key-id=*|--access-key-id=*|-access-key-secret=*|--access-key-secret=*|-credentials-file=*|--credentials-file=*|-timeout=*|--timeout=*) conn+=("$w") ;;
      -*) ;;
      *) if [ -z "$cmd" ]; then cmd=$w; elif [ -z "$verb" ]; then verb=$w; else args+=("$w"); fi ;;
    esac
  done
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$(smqctl $cmd $verb -h 2>/dev/null | sed -n 's/^  \(-[a-z-]*\).*/-\1/p')" -- "$cur"))
    return
  fi
  case $cmd in
    "") COMPREPLY=($(compgen -W "%s" -- "$cur")) ;;
    queue) if [ -z "$verb" ]; then COMPREPLY=($(compgen -W "%s" -- "$cur")); else COMPREPLY=($(compgen -W "$(smqctl "${conn[@]}" queue ls --quiet 2>/dev/null)" -- "$cur")); fi ;;
    message) if [ -z "$verb" ]; then COMPREPLY=($(compgen -W "%s" -- "$cur")); else COMPREPLY=($(compgen -W "$(smqctl "${conn[@]}" queue ls --quiet 2>/dev/null)" -- "$cur")); fi ;;
    topic) if [ -z "$verb" ]; then COMPREPLY=($(compgen -W "%s" -- "$cur")); elif [ "$verb" != ls ] && [ "$verb" != create ]; then COMPREPLY=($(compgen -W "$(smqctl "${conn[@]}" topic ls --quiet 2>/dev/null)" -- "$cur")); fi ;;
    subscription)
      if [ -z "$verb" ]; then COMPREPLY=($(compgen -W "%s" -- "$cur"))
      elif [ ${#args[@]} -eq 0 ]; then COMPREPLY=($(compgen -W "$(smqctl "${conn[@]}" topic ls --quiet 2>/dev/null)" -- "$cur"))
      elif [ "$verb" != ls ] && [ "$verb" != create ]; then COMPREPLY=($(compgen -W "$(smqctl "${conn[@]}" subscription ls "${args[0]}" --quiet 2>/dev/null)" -- "$cur"))
      fi ;;
    cluster) if [ -z "$verb" ]; then COMPREPLY=($(compgen -W "%s" -- "$cur")); fi ;;
    send|receive|peek|stats) COMPREPLY=($(compgen -W "$(smqctl "${conn[@]}" queue ls --quiet 2>/dev/null)" -- "$cur")) ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
  esac
}
complete -F _smqctl smqctl
`

const zshCompletion = `#compdef smqctl
# zsh completion for smqctl: smqctl completion zsh > "${fpath[1]}/_smqctl"
_smqctl() {
  local -a top queue message topic subscription cluster names
  top=(%s)
  queue=(%s)
  message=(%s)
  topic=(%s)
  subscription=(%s)
  cluster=(%s)
  # The words before the cursor less flags; the connection flags (and
  # their values) go with every name list.
  local -a words_ conn
  local w value=0
  for w in ${words[2,CURRENT-1]}; do
    if (( value )); then conn+=($w); value=0; continue; fi
    case $w in
      (-endpoint|--endpoint|-access-key-id|--access-key-id|-access-key-secret|--access-key-secret|-credentials-file|--credentials-file|-timeout|--timeout) conn+=($w); value=1 ;;
      (-endpoint=*|--endpoint=*|-access-key-id=*|--access-key-id=*|-access-key-secret=*|--access-key-secret=*|-credentials-file=*|--credentials-file=*|-timeout=*|--timeout=*) conn+=($w) ;;
      (-*) ;;
      (*) words_+=($w) ;;
    esac
  done
  case ${#words_} in
    0) _describe command top ;;
    1)
      case ${words_[1]} in
        queue) _describe verb queue ;;
        message) _describe verb message ;;
        topic) _describe verb topic ;;
        subscription) _describe verb subscription ;;
        cluster) _describe verb cluster ;;
        completion) _values shell bash zsh ;;
        stats|send|receive|peek) names=(${(f)"$(smqctl $conn queue ls --quiet 2>/dev/null)"}); _describe queue names ;;
      esac ;;
    *)
      case ${words_[1]} in
        queue|message|send|receive|peek|stats) names=(${(f)"$(smqctl $conn queue ls --quiet 2>/dev/null)"}); _describe queue names ;;
        topic) if [[ ${words_[2]} != (ls|create) ]]; then names=(${(f)"$(smqctl $conn topic ls --quiet 2>/dev/null)"}); _describe topic names; fi ;;
        subscription)
          if (( ${#words_} == 2 )); then names=(${(f)"$(smqctl $conn topic ls --quiet 2>/dev/null)"}); _describe topic names
          elif [[ ${words_[2]} != (ls|create) ]]; then names=(${(f)"$(smqctl $conn subscription ls ${words_[3]} --quiet 2>/dev/null)"}); _describe subscription names; fi ;;
      esac ;;
  esac
}
_smqctl "$@"
`
