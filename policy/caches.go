package policy

import "strings"

// ownerCaches are the build and package caches in the owner's home whose
// content the owner's own tools use without building or checking it again
// (an object in the Go build cache is linked as it is, a tarball in npm's
// cache installed, a crate in cargo's registry compiled). A confined
// session may write none of them: it gets caches of its own
// (sandbox/cache.go).
var ownerCaches = []string{
	"~/.cache/go-build", "~/go/pkg/mod", "~/.npm", "~/.cache/pip", "~/.cache/yarn", "~/.yarn",
	"~/.cache/uv", "~/.cargo", "~/.rustup", "~/.m2", "~/.gradle", "~/.local/share/pnpm", "~/.bun",
}

// ownerCache says how the sandbox path p shares an owner's cache: "" when
// it does not, else why, naming the cache.
func ownerCache(p string) string {
	for _, c := range ownerCaches {
		switch {
		case p == c:
			return "is the owner's build or package cache " + c
		case strings.HasPrefix(p, c+"/"):
			return "is in the owner's build or package cache " + c
		case strings.HasPrefix(c, p+"/"):
			return "holds the owner's build or package cache " + c
		}
	}
	return ""
}
