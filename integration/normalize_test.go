package integration

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
)

// masked replaces a value that legitimately differs between two runs. The
// key stays, so that its presence is still compared.
const masked = "<masked>"

// volatileKeys are result keys whose values differ between any two runs.
var volatileKeys = map[string]bool{
	"start":          true, // command/shell timing
	"end":            true,
	"delta":          true,
	"elapsed":        true, // reboot: seconds until the target came back
	"ansible_job_id": true, // async jid: random
	"results_file":   true, // ~/.ansible_async/<jid>
	"attempts":       true, // until/retries: timing dependent for async_status
	"started":        true, // async: 0/1 depending on timing of the first poll
}

// volatileStat are keys of the stat module's "stat" result (and of the file
// module's before/after diff) that differ for every new file.
var volatileStat = map[string]bool{
	"atime":   true,
	"mtime":   true,
	"ctime":   true,
	"inode":   true,
	"dev":     true,
	"version": true, // inode generation number
}

// volatileFacts are gathered facts whose values change from run to run on
// the same machine (clocks, counters, free memory, the ssh client port).
var volatileFacts = map[string]bool{
	"ansible_date_time":      true,
	"ansible_uptime_seconds": true,
	"ansible_memfree_mb":     true,
	"ansible_memory_mb":      true,
	"ansible_mounts":         true, // size_available, block_used, ...
	"ansible_loadavg":        true,
}

// volatileEnv are environment variables whose values differ per connection.
var volatileEnv = map[string]bool{
	"SSH_CLIENT":     true, // client port
	"SSH_CONNECTION": true,
	"SSH_TTY":        true,
	"XDG_SESSION_ID": true,
}

// unorderedFacts are lists whose order is not meaningful (the kernel lists
// network interfaces in no fixed order).
var unorderedFacts = map[string]bool{
	"ansible_interfaces":                true,
	"ansible_virtualization_tech_guest": true,
	"ansible_virtualization_tech_host":  true,
	"ansible_all_ipv4_addresses":        true,
	"ansible_all_ipv6_addresses":        true,
}

// sortedStrings sorts a list of strings; other values are returned as is.
func sortedStrings(v any) any {
	l, ok := v.([]any)
	if !ok {
		return v
	}
	s := make([]string, 0, len(l))
	for _, e := range l {
		str, ok := e.(string)
		if !ok {
			return v
		}
		s = append(s, str)
	}
	sort.Strings(s)
	out := make([]any, len(s))
	for i, e := range s {
		out[i] = e
	}
	return out
}

// stringRewrites hide run-specific names inside strings.
var stringRewrites = []struct {
	re   *regexp.Regexp
	with string
}{
	// Remote temp dirs: ansible-tmp-<time>-<pid>-<random>.
	{regexp.MustCompile(`ansible-tmp-[0-9]+\.[0-9]+-[0-9]+-[0-9]+`), "ansible-tmp-X"},
	// Controller temp dirs and files.
	{regexp.MustCompile(`ansible-local-[0-9]+[a-z0-9_]+`), "ansible-local-X"},
	{regexp.MustCompile(`\btmp[a-z0-9_]{8}\b`), "tmpX"},
	// A copy's content in a controller temp file (2.18+ shows its name
	// as _original_basename).
	{regexp.MustCompile(`^\.[a-z0-9_]{8}$`), ".X"},
	// Module temp files on the target (copy, template, lineinfile, ...).
	{regexp.MustCompile(`\.Ansible[A-Za-z0-9_]*\.[A-Za-z0-9_]{8}\b`), ".AnsibleX"},
	// A module's payload dir on the target (tempfile.mkdtemp), as
	// tracebacks show it.
	{regexp.MustCompile(`\bansible_([a-z0-9_]+)_payload_[a-z0-9_]{8}/`), "ansible_${1}_payload_X/"},
	// The AnsiballZ zip as a traceback quotes its source line: built at
	// run time, it differs between any two runs.
	{regexp.MustCompile(`zip_data='[A-Za-z0-9+/=]*'`), "zip_data='X'"},
	// Async job ids and their status files.
	{regexp.MustCompile(`\bj[0-9]{6,}\.[0-9]+\b`), "jX"},
	// Dates as printed by command/shell start and end.
	{regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+\b`), "DATE"},
}

func normalizeString(s string) string {
	for _, r := range stringRewrites {
		s = r.re.ReplaceAllString(s, r.with)
	}
	return s
}

// normalize returns a copy of v (decoded JSON) with volatile parts masked.
// parent is the key v sits under.
func normalize(v any, parent string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			switch {
			case volatileKeys[k]:
				out[k] = masked
			case (parent == "stat" || parent == "before" || parent == "after") && volatileStat[k]:
				// stat results, and the file module's diff of a touch
				out[k] = masked
			case (parent == "before" || parent == "after") && (k == "mtime" || k == "atime"):
				// file's diff of a path made earlier in the same run
				out[k] = masked
			case parent == "ansible_facts" && volatileFacts[k]:
				out[k] = masked
			case (parent == "ansible_env" || parent == "env") && volatileEnv[k]:
				out[k] = masked
			case unorderedFacts[k]:
				out[k] = sortedStrings(normalize(val, k))
			default:
				out[k] = normalize(val, k)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = normalize(val, parent)
		}
		return out
	case string:
		return normalizeString(x)
	default:
		return v
	}
}

// normalizeEvents returns the events in a canonical order (tasks in the
// order they first ran, hosts sorted within a task: hosts run in parallel)
// with results normalized.
func normalizeEvents(events []taskEvent) []taskEvent {
	first := map[string]int{}
	for i, e := range events {
		k := e.Play + "\x00" + e.Task
		if _, ok := first[k]; !ok {
			first[k] = i
		}
	}
	out := make([]taskEvent, len(events))
	copy(out, events)
	sort.SliceStable(out, func(i, j int) bool {
		fi, fj := first[out[i].Play+"\x00"+out[i].Task], first[out[j].Play+"\x00"+out[j].Task]
		if fi != fj {
			return fi < fj
		}
		return out[i].Host < out[j].Host
	})
	for i := range out {
		out[i].Result, _ = normalize(out[i].Result, "").(map[string]any)
	}
	return out
}

var (
	permanentlyAdded = regexp.MustCompile(`Warning: Permanently added [^\n]*? to the list of known hosts\.\r?\n?`)
	spaces           = regexp.MustCompile(`\s+`)
)

// brokenPipe is how Ansible reports an ssh that exited before it could be
// given the pipelined module on stdin. Whether stock sees it or the ssh error
// for a closed port is a race inside stock itself.
const brokenPipe = "[Errno 32] Broken pipe"

// sameUnreachable reports whether two UNREACHABLE messages are of one class:
// equal once unreachableClass has cleaned them, or, when one lost its cause
// to the broken-pipe race, of the same kind (the text before "ssh:").
func sameUnreachable(a, b string) bool {
	ca, cb := unreachableClass(a), unreachableClass(b)
	if ca == cb {
		return true
	}
	if strings.Contains(a, brokenPipe) || strings.Contains(b, brokenPipe) {
		ka, _, _ := strings.Cut(ca, "ssh:")
		kb, _, _ := strings.Cut(cb, "ssh:")
		return ka == kb
	}
	return false
}

// unreachableClass reduces an UNREACHABLE message to what must not change:
// it drops the known_hosts notice and line-ending and spacing differences.
func unreachableClass(msg string) string {
	msg = permanentlyAdded.ReplaceAllString(msg, "")
	msg = strings.ReplaceAll(msg, "\r", "")
	return strings.TrimSpace(spaces.ReplaceAllString(msg, " "))
}

// normalizeStderr returns ansible-playbook's stderr with run-specific names
// hidden.
func normalizeStderr(s string) string {
	return normalizeString(s)
}

// diffValues appends to diffs every difference between a and b, naming the
// path. Values are decoded JSON.
func diffValues(path string, a, b any, diffs *[]string) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			va, oka := x[k]
			vb, okb := y[k]
			p := path + "." + k
			switch {
			case !oka:
				*diffs = append(*diffs, fmt.Sprintf("%s: missing, want %s", p, short(vb)))
			case !okb:
				*diffs = append(*diffs, fmt.Sprintf("%s: %s, want missing", p, short(va)))
			default:
				diffValues(p, va, vb, diffs)
			}
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		if len(x) != len(y) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %d elements, want %d: %s, want %s", path, len(x), len(y), short(x), short(y)))
			return
		}
		for i := range x {
			diffValues(fmt.Sprintf("%s[%d]", path, i), x[i], y[i], diffs)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*diffs = append(*diffs, fmt.Sprintf("%s: %s, want %s", path, short(a), short(b)))
	}
}

// short renders v as JSON, cut to a readable length.
func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const max = 600
	if len(b) > max {
		return string(b[:max]) + fmt.Sprintf("...(%d bytes)", len(b))
	}
	return string(b)
}
