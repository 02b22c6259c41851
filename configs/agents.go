package configs

import (
	"bytes"
	"embed"
	"fmt"
	"sort"
	"strings"
)

// agentFS holds the agent profiles: for each client, the classes of its
// files in the workspace and its further roots in the owner's home.
//
//go:embed agents/*.yaml
var agentFS embed.FS

// Agents lists the agent profiles aerfs init --agent knows.
func Agents() []string {
	ents, _ := agentFS.ReadDir("agents")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// AgentPolicy is the policy file aerfs init --agent name writes: the
// profile's leading comment, the default policy (whose classes already
// cover every known client's files in the workspace) with the profile's
// network and sandbox blocks, when it has them, in place of the default's,
// and the profile's roots, the client's directories in the owner's home,
// at the end.
func AgentPolicy(name string) ([]byte, error) {
	prof, err := profile(name)
	if err != nil {
		return nil, err
	}
	head, roots := splitProfile(prof)
	if roots == "" {
		return nil, fmt.Errorf("agent profile %s: needs a roots block", name)
	}
	var b bytes.Buffer
	b.WriteString(head)
	b.WriteString("#\n")
	b.Write(DefaultPolicy)
	b.WriteString("\n")
	b.WriteString(roots)
	// The network block replaces the default's with its comments (the
	// client's model and update hosts); the sandbox block keeps the
	// default's explanation above it (the client's caches and state).
	return withBlock(withBlock(b.Bytes(), prof, "network:", blockWithComments), prof, "sandbox:", topBlock), nil
}

// withBlock puts the profile's top-level block key (with the comments just
// above it), when it has one, in place of the default's, found by find.
func withBlock(pol, prof []byte, key string, find func([]string, string) (int, int)) []byte {
	plines := strings.SplitAfter(string(prof), "\n")
	ps, pe := blockWithComments(plines, key)
	if ps < 0 {
		return pol
	}
	lines := strings.SplitAfter(string(pol), "\n")
	ds, de := find(lines, key)
	if ds < 0 {
		return pol
	}
	var b bytes.Buffer
	for _, l := range lines[:ds] {
		b.WriteString(l)
	}
	for _, l := range plines[ps:pe] {
		b.WriteString(l)
	}
	for _, l := range lines[de:] {
		b.WriteString(l)
	}
	return b.Bytes()
}

// blockWithComments is topBlock with the comment lines just above the key.
func blockWithComments(lines []string, key string) (start, end int) {
	start, end = topBlock(lines, key)
	for start > 0 && strings.HasPrefix(lines[start-1], "#") {
		start--
	}
	return start, end
}

// AgentRoot names the root that guards the home directory of the agent
// name: the first root of its profile.
func AgentRoot(name string) (string, error) {
	prof, err := profile(name)
	if err != nil {
		return "", err
	}
	lines := strings.SplitAfter(string(prof), "\n")
	start, end := topBlock(lines, "roots:")
	for _, l := range lines[max(start+1, 0):max(end, 0)] {
		if k, ok := strings.CutPrefix(strings.TrimRight(l, "\n"), "  "); ok && k != "" && k[0] != ' ' && k[0] != '#' {
			return strings.TrimSuffix(k, ":"), nil
		}
	}
	return "", fmt.Errorf("agent profile %s: needs a roots block", name)
}

func profile(name string) ([]byte, error) {
	prof, err := agentFS.ReadFile("agents/" + name + ".yaml")
	if err != nil || strings.ContainsAny(name, "/.") {
		return nil, fmt.Errorf("unknown agent %q (known: %s)", name, strings.Join(Agents(), ", "))
	}
	return prof, nil
}

// splitProfile cuts a profile into its leading comment and its roots block
// (with the comments just above it).
func splitProfile(prof []byte) (head, roots string) {
	lines := strings.SplitAfter(string(prof), "\n")
	rs, re := topBlock(lines, "roots:")
	if rs < 0 {
		return "", ""
	}
	// The head is the leading comment, up to the first blank line.
	i := 0
	for i < rs && strings.TrimSpace(lines[i]) != "" {
		i++
	}
	head = strings.TrimRight(strings.Join(lines[:i], ""), "\n") + "\n"
	j := rs
	for j > i && (strings.HasPrefix(lines[j-1], "#") || strings.TrimSpace(lines[j-1]) == "") {
		j--
	}
	return head, strings.TrimLeft(strings.Join(lines[j:re], ""), "\n")
}

// topBlock finds the top-level key line key and where its block ends: at
// the comments and blank lines before the next top-level key, or at the
// end. start is -1 when the key is absent.
func topBlock(lines []string, key string) (start, end int) {
	start = -1
	for i, l := range lines {
		if strings.TrimRight(l, "\n") == key {
			start = i
			break
		}
	}
	if start < 0 {
		return -1, -1
	}
	end = len(lines)
	for i := start + 1; i < len(lines); i++ {
		l := lines[i]
		if l != "" && l[0] != ' ' && l[0] != '#' && l[0] != '\n' && l[0] != '-' {
			end = i
			break
		}
	}
	for end > start+1 && (strings.HasPrefix(lines[end-1], "#") || strings.TrimSpace(lines[end-1]) == "") {
		end--
	}
	return start, end
}
