package toolsearch

import (
	"strings"
)

// relatedWords are groups of words that ask for the same thing in the
// vocabulary of tools: the verbs of what a tool does, the nouns of what
// it works on, and their common abbreviations. They are general English,
// not any one catalog's words: an agent says "folder", "ticket" or "PR"
// where a tool says directory, issue or pull request. A phrase of several
// words is one entry (roll back, pull request); it has no stop word, which
// a query's terms would not have. Each line is one group; a
// word may be in several, and is then related to the words of all of
// them. A word in a query also matches its group's other words, at
// relatedWeight.
//
// The groups are kept narrow on purpose: words that are only sometimes
// the same (file the noun and file a bug) stay apart, since a wrong match
// pushes a right tool out of the first five. A group is one of general
// tool vocabulary, not a patch for one task or one server's own words;
// some change no task of bench/search's query sets (close, reply, hover,
// the abbreviations …) and are kept unmeasured, as plain English.
const relatedWords = `
create, make, add, new, generate, build, set up, compose, produce, open, start, register, insert, draft
read, get, show, view, see, display, fetch, retrieve, open, inspect, print, details, detail, info, information, content, contents
list, enumerate, show, all, browse, index, overview
search, find, query, lookup, look up, locate, seek, grep, filter, discover, hunt
update, edit, change, modify, set, patch, alter, adjust, tweak, amend, rewrite
delete, remove, drop, erase, destroy, discard, purge, get rid, clear, wipe, uninstall
run, execute, exec, launch, invoke, evaluate, call, trigger, perform, start
stop, kill, terminate, end, cancel, abort, halt, quit
close, shut, dismiss
send, post, message, notify, tell, publish, announce, broadcast, share
reply, respond, answer
download, pull, fetch, retrieve, sync
upload, push, publish
move, rename, relocate, transfer
copy, clone, duplicate, fork, replicate
merge, combine, integrate, join
undo, revert, reset, roll back, rollback, restore
save, store, write, persist, record, keep, remember, memorize
assign, give, delegate, allocate, hand over, reassign
comment, note, remark, annotate, annotation, feedback
archive, shelve
navigate, go, visit, browse, load, open
click, press, tap, hit
type, fill, enter, input, write
hover, mouse over
screenshot, capture, snapshot, picture, image, photo, screen shot, grab
wait, pause, sleep
compare, diff, difference, changes
count, number, how many, total, tally
stat, stats, statistics, metrics, usage, usage stats
size, big, large, space, disk, storage, bytes
status, state, progress, health
history, log, timeline, changelog
file, document, doc
folder, directory, dir, path
repo, repository, project, codebase
issue, ticket, bug, task, problem, defect, incident, story
pr, pull request, merge request, mr, change request
message, chat, post, dm, text
user, member, person, people, account, profile, teammate, colleague
team, group, squad
org, organization, organisation, company, workspace, tenant
page, tab, webpage, web page, window
website, site, web, url, online, internet, webpage, link
db, database, datastore
collection, table
record, row, entry, item, object, document
config, configuration, setting, settings, preference, preferences, option, options
log, logs, output, stdout, console
error, exception, crash, failure, fault, event
cluster, kubernetes, k8s, kube
deployment, deploy, release, rollout
version, release, tag
label, tag, category
sprint, cycle, iteration
chart, graph, plot, diagram, visualize, visualise, visualization, draw
map, location, place, address, coordinate, coordinates, gps
directions, route, drive, driving, walk, walking, travel, commute, navigation
distance, far, how far, how long, travel time
email, mail, inbox
notification, alert, reminder
permission, access, allowed, grant, role
schema, field, fields, structure, column, columns, property, properties, attribute, attributes
script, javascript, js, code, snippet
shell, terminal, bash, command, process, program, console, cli
env, environment, variable, variables
secret, token, credential, credentials, key, password
link, associate, association, connect, relate, relation, relationship
watch, monitor, track, follow, subscribe
login, log in, signin, sign in, authenticate, auth, authentication
mongo, mongodb
postgres, postgresql, pg
python, py
typescript, ts
markdown, md
message, msg
namespace, ns
near, nearby, nearest, closest, around, local
restart, reboot, relaunch
install, setup
summarize, summary, overview
translate, translation
select, choose, option
`

// relatedWeight is the weight of a related word against the word itself.
const relatedWeight = 0.5

// relatedTable is relatedWords read for queries.
type relatedTable struct {
	// related maps a term (or a phrase's terms joined by spaces) to the
	// phrases it is related to, each as its terms.
	related map[string][][]string
	// senses counts the groups each word is in: a word of several
	// meanings (open: create, read, go to) is weaker evidence for each of
	// them.
	senses map[string]int
	// phrases are the entries of more than one word, as their joined
	// terms, so a query's words can be read as one of them.
	phrases map[string]bool
}

// relatedTerms is relatedWords read once. It is initialised by expression,
// like the stop words it reads entries with, so they are filled first.
var relatedTerms = readRelated(relatedWords)

// relatedWeightOf is the weight of the words related to key: relatedWeight
// shared among its meanings.
func relatedWeightOf(key string) float64 {
	return relatedWeight / float64(max(relatedTerms.senses[key], 1))
}

// readRelated reads groups of related words, one group a line, entries
// separated by commas.
func readRelated(text string) relatedTable {
	t := relatedTable{related: map[string][][]string{}, senses: map[string]int{}, phrases: map[string]bool{}}
	for _, line := range strings.Split(text, "\n") {
		var group [][]string
		for _, entry := range strings.Split(line, ",") {
			// An entry with a stop word (log in) would be read as its
			// other words alone (log), which mean something else.
			if terms := Terms(entry); len(terms) > 0 && len(terms) == len(strings.Fields(entry)) {
				group = append(group, terms)
			}
		}
		for _, p := range group {
			key := strings.Join(p, " ")
			t.senses[key]++
			if len(p) > 1 {
				t.phrases[key] = true
			}
			for _, q := range group {
				if qk := strings.Join(q, " "); qk != key && !containsPhrase(t.related[key], qk) {
					t.related[key] = append(t.related[key], q)
				}
			}
		}
	}
	return t
}

func containsPhrase(list [][]string, joined string) bool {
	for _, p := range list {
		if strings.Join(p, " ") == joined {
			return true
		}
	}
	return false
}
