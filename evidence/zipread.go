package evidence

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Limits bound what reading a bundle may cost. Entry sizes are measured
// while decompressing; headers are only used to refuse early.
type Limits struct {
	MaxEntries   int   // files in the bundle
	MaxEntrySize int64 // decompressed bytes of one file
	MaxTotalSize int64 // decompressed bytes of all files
}

// DefaultLimits are what VerifyBundle uses.
var DefaultLimits = Limits{MaxEntries: 100_000, MaxEntrySize: 256 << 20, MaxTotalSize: 1 << 30}

func ioErr(format string, args ...any) *VerifyError { return verr(KindIO, format, args...) }

// checkName accepts only the relative, clean, UTF-8 slash paths a bundle
// may contain; everything an extractor could be tricked by is refused.
func checkName(name string) error {
	switch {
	case name == "":
		return ioErr("zip: empty entry name")
	case !utf8.ValidString(name):
		return ioErr("zip: entry name %q is not UTF-8", name)
	case strings.ContainsRune(name, 0):
		return ioErr("zip: entry name %q contains NUL", name)
	case strings.Contains(name, `\`):
		return ioErr("zip: entry name %q contains a backslash", name)
	case strings.HasPrefix(name, "/"):
		return ioErr("zip: entry %q has an absolute path", name)
	case len(name) >= 2 && name[1] == ':':
		return ioErr("zip: entry %q has a drive letter", name)
	}
	for _, c := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		switch c {
		case "..":
			return ioErr("zip: entry %q escapes the bundle (..)", name)
		case "", ".":
			return ioErr("zip: entry %q is not a clean path", name)
		}
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return ioErr("zip: entry name %q contains a control character", name)
		}
	}
	return nil
}

// readZip reads a bundle zip entirely into memory, after checking every
// header, and writes nothing anywhere. Directory entries are dropped.
func readZip(ra io.ReaderAt, size int64, lim Limits) (map[string][]byte, error) {
	zr, err := zip.NewReader(ra, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, ioErr("zip: %v", err)
	}
	if zr == nil {
		return nil, ioErr("zip: %v", err)
	}
	if len(zr.File) > lim.MaxEntries {
		return nil, ioErr("zip: %d entries, limit %d", len(zr.File), lim.MaxEntries)
	}
	seen := make(map[string]bool, len(zr.File))
	var declared uint64
	for _, f := range zr.File {
		if err := checkName(f.Name); err != nil {
			return nil, err
		}
		if f.NonUTF8 {
			return nil, ioErr("zip: entry %q is not marked UTF-8", f.Name)
		}
		key := strings.ToLower(strings.TrimSuffix(f.Name, "/"))
		if seen[key] {
			return nil, ioErr("zip: duplicate entry %q", f.Name)
		}
		seen[key] = true
		mode := f.Mode()
		isDirName := strings.HasSuffix(f.Name, "/")
		switch {
		case mode&fs.ModeSymlink != 0:
			return nil, ioErr("zip: entry %q is a symlink", f.Name)
		case mode.IsDir() != isDirName:
			return nil, ioErr("zip: entry %q: directory flag and name disagree", f.Name)
		case mode.IsDir() && (f.UncompressedSize64 != 0 || f.CompressedSize64 != 0):
			return nil, ioErr("zip: directory entry %q has content", f.Name)
		case !mode.IsDir() && !mode.IsRegular():
			return nil, ioErr("zip: entry %q is not a regular file (%v)", f.Name, mode)
		}
		if f.Method != zip.Store && f.Method != zip.Deflate {
			return nil, ioErr("zip: entry %q: compression method %d not allowed", f.Name, f.Method)
		}
		if f.UncompressedSize64 > uint64(lim.MaxEntrySize) {
			return nil, ioErr("zip: entry %q declares %d bytes, limit %d", f.Name, f.UncompressedSize64, lim.MaxEntrySize)
		}
		declared += f.UncompressedSize64
		if declared > uint64(lim.MaxTotalSize) {
			return nil, ioErr("zip: entries declare more than %d bytes in total", lim.MaxTotalSize)
		}
	}
	out := make(map[string][]byte, len(zr.File))
	var total int64
	for _, f := range zr.File {
		if f.Mode().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, ioErr("zip: entry %q: %v", f.Name, err)
		}
		budget := min(lim.MaxEntrySize, lim.MaxTotalSize-total)
		b, err := io.ReadAll(io.LimitReader(rc, budget+1))
		rc.Close()
		if err != nil {
			return nil, ioErr("zip: entry %q: %v", f.Name, err)
		}
		if int64(len(b)) > budget {
			return nil, ioErr("zip: entry %q expands past its limit (%d bytes)", f.Name, budget)
		}
		total += int64(len(b))
		out[f.Name] = b
	}
	return out, nil
}

// readDirBundle reads a bundle directory with the same rules: regular
// files only (no symlinks anywhere), clean names, the same limits.
func readDirBundle(root string, lim Limits) (map[string][]byte, error) {
	fi, err := os.Lstat(root)
	if err != nil {
		return nil, ioErr("bundle: %v", err)
	}
	if !fi.IsDir() {
		return nil, ioErr("bundle: %s is not a directory or a .zip", root)
	}
	out := map[string][]byte{}
	var total int64
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		name := filepath.ToSlash(rel)
		if err := checkName(name); err != nil {
			return err
		}
		t := d.Type()
		switch {
		case t&fs.ModeSymlink != 0:
			return ioErr("bundle: %s is a symlink", name)
		case d.IsDir():
			return nil
		case !t.IsRegular():
			return ioErr("bundle: %s is not a regular file", name)
		}
		if len(out) >= lim.MaxEntries {
			return ioErr("bundle: more than %d files", lim.MaxEntries)
		}
		f, err := openRegular(p, syscallNoFollow)
		if err != nil {
			return ioErr("bundle: %s: %v", name, err)
		}
		defer f.Close()
		budget := min(lim.MaxEntrySize, lim.MaxTotalSize-total)
		b, err := io.ReadAll(io.LimitReader(f, budget+1))
		if err != nil {
			return ioErr("bundle: %s: %v", name, err)
		}
		if int64(len(b)) > budget {
			return ioErr("bundle: %s exceeds the size limit", name)
		}
		total += int64(len(b))
		out[name] = b
		return nil
	})
	if err != nil {
		var ve *VerifyError
		if errors.As(err, &ve) {
			return nil, ve
		}
		return nil, ioErr("bundle: %v", err)
	}
	return out, nil
}

// ReadBundleFiles opens a bundle (directory or .zip) under lim and returns
// its files by slash path. Nothing is extracted or written.
func ReadBundleFiles(path string, lim Limits) (map[string][]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, ioErr("bundle: %v", err)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return nil, ioErr("bundle: %s is not a regular file or a directory (%s); name an exported bundle", path, fi.Mode().Type())
	}
	if strings.HasSuffix(path, ".zip") || !fi.IsDir() {
		f, err := openRegular(path, 0)
		if err != nil {
			return nil, ioErr("bundle: %v", err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, ioErr("bundle: %v", err)
		}
		return readZip(f, fi.Size(), lim)
	}
	return readDirBundle(path, lim)
}

// openRegular opens path for reading without blocking (a FIFO or a device
// opened O_NONBLOCK does not wait for a peer) and refuses, after fstat on
// what was opened, anything that is not a regular file.
func openRegular(path string, flags int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscallNonBlock|flags, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	return f, nil
}
