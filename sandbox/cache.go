package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// # Caches of the session's own
//
// A build or package cache holds code that the owner's own builds run
// without building it again: an object in the Go build cache is linked by
// the owner's next go build of an unchanged package, a tarball in npm's
// cache is installed by the owner's next npm install. A session that could
// write the owner's caches would have the owner run its code, outside
// every session. So no cache of the owner's is writable to a session, and
// each confined session gets caches of its own: an empty directory that
// only it can reach, and the environment variables of the common tools
// pointing into it. With a mount namespace the directory is a tmpfs of the
// session's own, in no other process's view (not the owner's, not another
// session's), gone when the session's last process is; without one (a
// kernel that refuses the session a user namespace) it is a fresh
// directory in /tmp, left there.

// CacheEnvVar names the session's cache directory in its environment: a
// session started from within it keeps its parent's.
const CacheEnvVar = "AERFS_CACHE"

// cacheVars are the tools' cache variables and the directory each gets in
// the session's cache.
var cacheVars = [][2]string{
	{"GOCACHE", "go-build"},
	{"npm_config_cache", "npm"},
	{"PIP_CACHE_DIR", "pip"},
	{"YARN_CACHE_FOLDER", "yarn"},
	{"UV_CACHE_DIR", "uv"},
}

// SessionCache makes the session's cache directory. inNamespace: the
// caller is in the session's own mount namespace (SetupMounts), with the
// capability to mount there, and the directory is covered by a tmpfs of
// its own.
func SessionCache(inNamespace bool) (string, error) {
	dir, err := os.MkdirTemp("/tmp", "aerfs-cache-")
	if err != nil {
		return "", err
	}
	if inNamespace {
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
			os.Remove(dir)
			return "", fmt.Errorf("cache tmpfs: %w", err)
		}
	}
	return dir, nil
}

// cacheQuiet turn off the checks for a newer version that npm and pip
// make when their cache does not say they made one lately: with a cache
// that starts empty, every session's first npm or pip command would ask
// the registry, and the answer through the proxy taints the session as web
// content.
var cacheQuiet = []string{"npm_config_update_notifier=false", "PIP_DISABLE_PIP_VERSION_CHECK=1"}

// CacheEnv is the environment that points the tools at the session's
// cache directory dir.
func CacheEnv(dir string) []string {
	env := append([]string{CacheEnvVar + "=" + dir}, cacheQuiet...)
	for _, v := range cacheVars {
		env = append(env, v[0]+"="+filepath.Join(dir, v[1]))
	}
	return env
}
