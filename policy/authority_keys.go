package policy

// The authority keys of a policy file (docs/authority.md): registered
// attestors and their domains, the elevation thresholds, and whether
// agents' scripts may run. They are optional; a file that sets none gets
// k = 2, no attestors and no agent scripts.

import (
	"go.yaml.in/yaml/v3"
)

const (
	keyAttestors    = "attestors"
	keyElevation    = "elevation"
	keyAgentScripts = "agent_scripts"
)

var authorityKeys = []string{keyAttestors, keyElevation, keyAgentScripts}

// AuthoritySettings is the authority part of a policy. An attestor is
// named by the id of the TOOL_AUTH session it attests from.
type AuthoritySettings struct {
	Attestors    map[string]string // name → domain
	K            int               // elevation.k; 0: the default
	KFor         map[string]int    // elevation.exec, .control, .promote
	AgentScripts bool
	set          map[string]bool
}

// Authority returns the policy's authority settings (do not modify the maps).
func (p *Policy) Authority() AuthoritySettings { return p.auth }

// authorityKey parses one authority key into s.
func (ps *parser) authorityKey(key string, n *yaml.Node, s *spec) error {
	a := &s.auth
	if a.set == nil {
		a.set = map[string]bool{}
	}
	a.set[key] = true
	switch key {
	case keyAgentScripts:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&a.AgentScripts) != nil {
			return ps.errf(n, "agent_scripts is true or false", "agent_scripts must be true or false, found %q", n.Value)
		}
		return nil
	case keyElevation:
		a.KFor = map[string]int{}
		return ps.mapping(n, []string{"k", "exec", "control", "promote"}, func(k string, _, v *yaml.Node) error {
			var x int
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" || v.Decode(&x) != nil || x < 1 || x > 16 {
				return ps.errf(v, "an integer from 1 to 16", "elevation.%s must be an integer from 1 to 16, found %q", k, v.Value)
			}
			if k == "k" {
				a.K = x
			} else {
				a.KFor[k] = x
			}
			return nil
		})
	}
	a.Attestors = map[string]string{}
	if n.Kind != yaml.MappingNode {
		return ps.errf(n, "attestors: {NAME: {domain: DOMAIN}}", "attestors must be a mapping, found %s", kindName(n))
	}
	for i := 0; i < len(n.Content); i += 2 { // key, value pairs
		name, err := ps.str(n.Content[i], "an attestor name")
		if err != nil {
			return err
		}
		if _, dup := a.Attestors[name]; dup || name == "" {
			return ps.errf(n.Content[i], "each attestor once, with a non-empty name", "bad or duplicate attestor %q", name)
		}
		var dom string
		err = ps.entry(n.Content[i+1], []string{"domain"}, func(_ string, v *yaml.Node) error {
			var err error
			dom, err = ps.str(v, "attestors."+name+".domain")
			return err
		})
		if err != nil {
			return err
		}
		if dom == "" {
			return ps.errf(n.Content[i+1], "name the attestor's independent domain", "attestors.%s.domain is empty", name)
		}
		a.Attestors[name] = dom
	}
	return nil
}

// mergeAuthority takes from base what the file does not set.
func mergeAuthority(s, base *spec) {
	if base == nil {
		return
	}
	for _, k := range authorityKeys {
		if s.auth.set[k] {
			continue
		}
		switch k {
		case keyAttestors:
			s.auth.Attestors = base.auth.Attestors
		case keyElevation:
			s.auth.K, s.auth.KFor = base.auth.K, base.auth.KFor
		case keyAgentScripts:
			s.auth.AgentScripts = base.auth.AgentScripts
		}
	}
}
