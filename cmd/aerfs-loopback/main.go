// Command aerfs-loopback mounts a plain go-fuse loopback of a backing
// directory with the mount options aerfs uses (fs/mount.go). It is the
// baseline of the benchmark suite (scripts/bench): the figures of aerfs are
// read against it, so any difference between the two is aerfs's own cost,
// not go-fuse's.
//
// It prints "ready" on stdout once the mount serves and unmounts on SIGTERM
// or SIGINT. With -passthrough=false its files do not offer a passthrough
// fd, so every read and write crosses the daemon as it does on a rootless
// mount, where the kernel refuses to register backing files.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	passthrough := flag.Bool("passthrough", true, "let the kernel serve plain reads and writes from the backing file (root only)")
	debug := flag.Bool("debug", false, "log every FUSE request")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: aerfs-loopback [-passthrough=false] [-debug] BACKING MOUNTPOINT\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), *passthrough, *debug); err != nil {
		fmt.Fprintf(os.Stderr, "aerfs-loopback: %v\n", err)
		os.Exit(1)
	}
}

func run(backing, mountpoint string, passthrough, debug bool) error {
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return err
	}
	lr := &gofs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	var root gofs.InodeEmbedder
	if passthrough {
		root = &gofs.LoopbackNode{RootData: lr}
	} else {
		root = &noPTNode{LoopbackNode: &gofs.LoopbackNode{RootData: lr}}
	}
	lr.RootNode = root

	// The same options as aerfs's plain paths (fs/mount.go): one second of
	// entry and attribute caching, no negative caching.
	sec := time.Second
	var zero time.Duration
	opts := &gofs.Options{
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			AllowOther:  true,
			Options:     []string{"default_permissions"},
			FsName:      backing,
			Name:        "aerfs-loopback",
			DirectMount: true,
			Debug:       debug,
		},
		NullPermissions: true,
	}
	server, err := gofs.Mount(mountpoint, root, opts)
	if err != nil {
		return fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	if err := server.WaitMount(); err != nil {
		server.Unmount()
		return err
	}
	fmt.Println("ready")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	done := make(chan struct{})
	go func() { server.Wait(); close(done) }()
	select {
	case <-sig:
	case <-done:
		return nil
	}
	var last error
	for i := 0; i < 50; i++ {
		if last = server.Unmount(); last == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if last != nil {
		// Busy: detach so the mountpoint is free; the kernel finishes
		// when its last user leaves.
		syscall.Unmount(mountpoint, syscall.MNT_DETACH)
	}
	<-done
	return nil
}

// noPTNode is a loopback node whose files hide PassthroughFd, modelling a
// rootless mount.
type noPTNode struct {
	*gofs.LoopbackNode
}

var (
	_ gofs.NodeWrapChilder = (*noPTNode)(nil)
	_ gofs.NodeOpener      = (*noPTNode)(nil)
	_ gofs.NodeCreater     = (*noPTNode)(nil)
)

func (n *noPTNode) WrapChild(ctx context.Context, ops gofs.InodeEmbedder) gofs.InodeEmbedder {
	return &noPTNode{LoopbackNode: ops.(*gofs.LoopbackNode)}
}

func (n *noPTNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return noPTFile{fh.(loopbackFile)}, fl, 0
}

func (n *noPTNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, noPTFile{fh.(loopbackFile)}, fl, 0
}

// loopbackFile is every interface of *gofs.LoopbackFile except
// FilePassthroughFder; embedding it promotes exactly these methods.
type loopbackFile interface {
	gofs.FileHandle
	gofs.FileReleaser
	gofs.FileGetattrer
	gofs.FileReader
	gofs.FileWriter
	gofs.FileGetlker
	gofs.FileSetlker
	gofs.FileSetlkwer
	gofs.FileLseeker
	gofs.FileFlusher
	gofs.FileFsyncer
	gofs.FileSetattrer
	gofs.FileAllocater
	gofs.FileIoctler
}

type noPTFile struct{ loopbackFile }

var _ = func() bool {
	var f any = noPTFile{}
	_, pt := f.(gofs.FilePassthroughFder)
	if pt {
		panic("noPTFile offers passthrough")
	}
	return true
}()
