// Package configs holds the files aerfs ships: the default policy, which
// the policy package parses when no file is given and which aerfs init
// writes out for users to edit.
package configs

import _ "embed"

// DefaultPolicy is aerfs.yaml, the default policy file.
//
//go:embed aerfs.yaml
var DefaultPolicy []byte

// MountHelper is mount.fuse.aerfs, the helper mount(8) runs for
// "mount -t fuse.aerfs"; its header comment is its manual.
//
//go:embed mount.fuse.aerfs
var MountHelper []byte
