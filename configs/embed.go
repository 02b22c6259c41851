// Package configs holds the files aerfs ships: the default policy, which
// the policy package parses when no file is given and which aerfs init
// writes out for users to edit.
package configs

import _ "embed"

// DefaultPolicy is aerfs.yaml, the default policy file.
//
//go:embed aerfs.yaml
var DefaultPolicy []byte
