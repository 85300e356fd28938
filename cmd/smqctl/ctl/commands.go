package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// verb is one command: its synopsis and its function.
type verb struct {
	synopsis string
	run      func(r *run, ctx context.Context, name string, args []string) error
}

// groups returns the verb tree: resource, then verb. A verb under "" is a
// top level verb. Topics and their subscriptions are two groups, as the
// API's resources are (topic spec §1.1).
func groups() map[string]map[string]verb {
	return map[string]map[string]verb{
		"queue": {
			"ls":      {"list queues with their message counts", (*run).queueLs},
			"create":  {"create a queue (attributes as flags)", (*run).queueCreate},
			"get":     {"show a queue's attributes and counts", (*run).queueGet},
			"set":     {"change a queue's attributes", (*run).queueSet},
			"rm":      {"delete queues and their messages", (*run).queueRm},
			"purge":   {"delete every message of queues; the queues stay (smqd's PurgeQueue)", (*run).queuePurge},
			"redrive": {"move a dead-letter queue's messages back to the queues they came from (or --to QUEUE)", (*run).queueRedrive},
		},
		"message": {
			"send":       {"send a message from an argument, a file or stdin", (*run).msgSend},
			"receive":    {"receive messages (they turn invisible; --delete deletes them)", (*run).msgReceive},
			"peek":       {"show active messages without receiving them", (*run).msgPeek},
			"delete":     {"delete messages by receipt handle", (*run).msgDelete},
			"visibility": {"change a received message's visibility timeout", (*run).msgVisibility},
		},
		"topic": {
			"ls":      {"list topics with their message counts", (*run).topicLs},
			"create":  {"create a topic (attributes as flags)", (*run).topicCreate},
			"get":     {"show a topic's attributes", (*run).topicGet},
			"set":     {"change a topic's attributes", (*run).topicSet},
			"rm":      {"delete topics and their subscriptions", (*run).topicRm},
			"publish": {"publish a message from an argument, a file or stdin (--tag)", (*run).topicPublish},
		},
		"subscription": {
			"ls":     {"list a topic's subscriptions: subscription ls TOPIC", (*run).subLs},
			"create": {"subscribe ENDPOINT (http(s)://host[:port][/path], in smqd's --push-allow, or acs:mns:{region}:{account}:queues/{queue}): subscription create TOPIC NAME ENDPOINT", (*run).subCreate},
			"get":    {"show a subscription's attributes: subscription get TOPIC NAME", (*run).subGet},
			"set":    {"change its strategy, filter tag or dead-letter queue", (*run).subSet},
			"rm":     {"delete subscriptions: subscription rm TOPIC NAME...", (*run).subRm},
		},
		"cluster": {
			"status": {"a cluster node's view: members, each shard's leader, term, commit and followers' lag", (*run).clusterStatus},
			"add":    {"add a node (started with --join) to every shard: cluster add ID RAFT-HOST:PORT", (*run).clusterAdd},
			"rm":     {"remove a node from every shard, through another member: cluster rm ID", (*run).clusterRm},
		},
		"": {
			"stats":      {"live message counts and rates per queue", (*run).stats},
			"backup":     {"download an online backup of the node, or of the whole cluster through any node, checked whole: backup -o FILE (restore: smqd restore); backup --cancel ends the one running on the node", (*run).backup},
			"migrate":    {"make this smqd's queues, topics and subscriptions on another and move its messages there: migrate --to ENDPOINT", (*run).migrate},
			"completion": {"print the bash or zsh completion script", (*run).completion},
			"version":    {"what this smqctl was built from (git revision, Go version)", (*run).version},
		},
	}
}

// shortcuts are top-level names for verbs of a group.
var shortcuts = map[string][2]string{
	"send":    {"message", "send"},
	"receive": {"message", "receive"},
	"peek":    {"message", "peek"},
}

func (r *run) dispatch(ctx context.Context, args []string) error {
	root := flag.NewFlagSet("smqctl", flag.ContinueOnError)
	r.g.register(root)
	root.SetOutput(io.Discard) // the error is printed once, by the caller (usagef), as for a command's flags
	root.Usage = func() {}
	if err := root.Parse(args); err != nil {
		if err == flag.ErrHelp {
			r.help()
			return nil
		}
		return usagef("%v", err)
	}
	args = root.Args()
	if len(args) == 0 {
		r.help()
		return usagef("no command given")
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		r.help()
		return nil
	}
	if sc, ok := shortcuts[name]; ok {
		v := groups()[sc[0]][sc[1]]
		return v.run(r, ctx, sc[0]+" "+sc[1], args[1:])
	}
	if v, ok := groups()[""][name]; ok {
		return v.run(r, ctx, name, args[1:])
	}
	g, ok := groups()[name]
	if !ok {
		return usagef("unknown command %q", name)
	}
	if len(args) < 2 {
		return usagef("%s needs a verb: %s", name, strings.Join(verbNames(name), ", "))
	}
	switch args[1] {
	case "help", "-h", "--help", "-help":
		r.groupHelp(name)
		return nil
	}
	v, ok := g[args[1]]
	if !ok {
		return usagef("unknown verb %q for %s: want %s", args[1], name, strings.Join(verbNames(name), ", "))
	}
	return v.run(r, ctx, name+" "+args[1], args[2:])
}

func verbNames(group string) []string {
	var out []string
	for v := range groups()[group] {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// groupHelp lists a command group's verbs ("smqctl cluster -h").
func (r *run) groupHelp(group string) {
	w := r.env.Stdout
	fmt.Fprintf(w, "Usage: smqctl %s <verb> [arguments] [flags]\n\n", group)
	for _, v := range verbNames(group) {
		fmt.Fprintf(w, "  %-23s %s\n", group+" "+v, groups()[group][v].synopsis)
	}
	fmt.Fprintf(w, "\n\"smqctl %s <verb> -h\" lists a verb's flags.\n", group)
}

func (r *run) help() {
	w := r.env.Stdout
	fmt.Fprint(w, `smqctl: the command-line client of smqd (the MNS queue and topic API).

Usage: smqctl [flags] <command> [arguments] [flags]

`)
	for _, g := range []string{"queue", "message", "topic", "subscription", "cluster", ""} {
		for _, v := range verbNames(g) {
			name := strings.TrimSpace(g + " " + v)
			fmt.Fprintf(w, "  %-23s %s\n", name, groups()[g][v].synopsis)
		}
	}
	fmt.Fprint(w, `  send, receive, peek     the same as message send, receive, peek

Every command takes --json, --endpoint, --access-key-id, --access-key-secret,
--credentials-file and --timeout; "smqctl <command> -h" lists its flags.
Endpoint (smqd's address): --endpoint, $SMQ_ENDPOINT, else `+DefaultEndpoint+`.
Keys: the flags, $ALIBABA_CLOUD_ACCESS_KEY_ID and $ALIBABA_CLOUD_ACCESS_KEY_SECRET,
else the credentials file smqd writes (./`+DefaultCredentialsFile+` after make run).

Exit status: 0 done (an empty receive too), 1 the server refused or failed,
2 bad command line or no credentials, 3 queue, message, topic or
subscription not found, 4 credentials refused, 5 cluster status of a node
that is not healthy (printed all the same).
`)
}
