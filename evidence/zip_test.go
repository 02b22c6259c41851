package evidence

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type zipEntry struct {
	name string
	mode os.FileMode
	data string
	raw  *zip.FileHeader // written with CreateRaw when set
	body []byte
}

func makeZip(t testing.TB, entries []zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		if e.raw != nil {
			w, err := zw.CreateRaw(e.raw)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(e.body)
			continue
		}
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.data))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zerosDeflate returns a raw deflate stream of n zero bytes (n a multiple
// of 1 MiB) built from one repeated block, so a 1 GiB bomb costs about a
// megabyte and milliseconds to make.
func zerosDeflate(t testing.TB, n int64) []byte {
	t.Helper()
	const chunk = 1 << 20
	var out bytes.Buffer
	fw, _ := flate.NewWriter(&out, flate.BestCompression)
	zero := make([]byte, chunk)
	fw.Write(zero)
	fw.Flush()
	first := out.Len()
	fw.Write(zero)
	fw.Flush()
	second := out.Len()
	fw.Write(zero)
	fw.Flush()
	rep := append([]byte(nil), out.Bytes()[first:second]...)
	if !bytes.Equal(rep, out.Bytes()[second:]) {
		t.Fatal("deflate of zeros is not periodic; cannot build the bomb cheaply")
	}
	stream := append([]byte(nil), out.Bytes()[:second]...)
	for i := int64(2); i < n/chunk; i++ {
		stream = append(stream, rep...)
	}
	return append(stream, 0x03, 0x00) // final empty fixed-Huffman block
}

func TestZipBombStreamIsValid(t *testing.T) {
	d := zerosDeflate(t, 4<<20)
	r := flate.NewReader(bytes.NewReader(d))
	var n int64
	buf := make([]byte, 1<<16)
	for {
		k, err := r.Read(buf)
		n += int64(k)
		if err != nil {
			break
		}
	}
	if n != 4<<20 {
		t.Fatalf("inflated %d bytes", n)
	}
}

func TestMaliciousZips(t *testing.T) {
	ok := []zipEntry{{name: "manifest.json", data: "{}"}}
	bomb := zerosDeflate(t, 1<<30)
	crc := crc32.NewIEEE()
	zero := make([]byte, 1<<20)
	for i := 0; i < 1024; i++ {
		crc.Write(zero)
	}
	many := make([]zipEntry, 10_000)
	for i := range many {
		many[i] = zipEntry{name: "blobs/" + strings.Repeat("0", 58) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + "00" + string(rune('a'+i/17576%26))}
	}
	cases := []struct {
		name    string
		entries []zipEntry
		lim     Limits
		msg     string
	}{
		{"zip slip", append(ok, zipEntry{name: "blobs/../../evil", data: "x"}), DefaultLimits, "escapes"},
		{"dotdot only", append(ok, zipEntry{name: "../evil", data: "x"}), DefaultLimits, "escapes"},
		{"absolute path", append(ok, zipEntry{name: "/tmp/evil", data: "x"}), DefaultLimits, "absolute"},
		{"backslash path", append(ok, zipEntry{name: `..\evil`, data: "x"}), DefaultLimits, "backslash"},
		{"symlink entry", append(ok, zipEntry{name: "blobs/link", mode: os.ModeSymlink | 0o777, data: "/etc/passwd"}), DefaultLimits, "symlink"},
		{"duplicate entry", append(ok, zipEntry{name: "manifest.json", data: "{}"}), DefaultLimits, "duplicate"},
		{"duplicate by case", append(ok, zipEntry{name: "MANIFEST.json", data: "{}"}), DefaultLimits, "duplicate"},
		{"non-UTF-8 name", append(ok, zipEntry{name: "blobs/\xff\xfe", data: "x"}), DefaultLimits, "not UTF-8"},
		{"NUL in name", append(ok, zipEntry{name: "blobs/a\x00b", data: "x"}), DefaultLimits, "NUL"},
		{"directory with content", append(ok, zipEntry{raw: &zip.FileHeader{Name: "blobs/", Method: zip.Store,
			CRC32: crc32.ChecksumIEEE([]byte("x")), CompressedSize64: 1, UncompressedSize64: 1}, body: []byte("x")}), DefaultLimits, "directory entry"},
		{"directory masquerading as a file", append(ok, zipEntry{name: "blobs/x", mode: os.ModeDir | 0o755}), DefaultLimits, "directory flag"},
		{"10,000-entry bomb (limit 5,000)", many, Limits{MaxEntries: 5000, MaxEntrySize: 1 << 20, MaxTotalSize: 1 << 30}, "10000 entries, limit 5000"},
		{"1 GiB bomb, honest header", []zipEntry{{raw: &zip.FileHeader{Name: "records.jsonl", Method: zip.Deflate,
			CRC32: crc.Sum32(), CompressedSize64: uint64(len(bomb)), UncompressedSize64: 1 << 30}, body: bomb}}, DefaultLimits, "declares"},
		{"1 GiB bomb, lying header", []zipEntry{{raw: &zip.FileHeader{Name: "records.jsonl", Method: zip.Deflate,
			CRC32: crc.Sum32(), CompressedSize64: uint64(len(bomb)), UncompressedSize64: 1000}, body: bomb}}, DefaultLimits, "records.jsonl"},
		{"1 GiB bomb, header at the limit", []zipEntry{{raw: &zip.FileHeader{Name: "records.jsonl", Method: zip.Deflate,
			CRC32: crc.Sum32(), CompressedSize64: uint64(len(bomb)), UncompressedSize64: 1 << 30}, body: bomb}},
			Limits{MaxEntries: 10, MaxEntrySize: 1 << 30, MaxTotalSize: 8 << 20}, "declare more than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			z := filepath.Join(work, "b.zip")
			if err := os.WriteFile(z, makeZip(t, tc.entries), 0o644); err != nil {
				t.Fatal(err)
			}
			cwd, _ := os.Getwd()
			before := listTree(t, cwd)
			_, err := VerifyBundleLimits(z, "", tc.lim)
			checkKind(t, err, KindIO, tc.msg)
			ents, _ := os.ReadDir(work)
			if len(ents) != 1 {
				t.Fatalf("verification wrote files: %v", ents)
			}
			if after := listTree(t, cwd); after != before {
				t.Fatal("verification wrote into the working directory")
			}
			if _, err := os.Lstat(filepath.Join(work, "..", "evil")); err == nil {
				t.Fatal("zip slip wrote a file")
			}
		})
	}
}

// TestZipMeasuresActualBytes: a deflate stream longer than its entry limit
// is refused while inflating, whatever the header claims.
func TestZipMeasuresActualBytes(t *testing.T) {
	bomb := zerosDeflate(t, 16<<20)
	crc := crc32.NewIEEE()
	crc.Write(make([]byte, 16<<20))
	data := makeZip(t, []zipEntry{{raw: &zip.FileHeader{Name: "records.jsonl", Method: zip.Deflate,
		CRC32: crc.Sum32(), CompressedSize64: uint64(len(bomb)), UncompressedSize64: 16 << 20}, body: bomb}})
	_, err := readZip(bytes.NewReader(data), int64(len(data)), Limits{MaxEntries: 10, MaxEntrySize: 16 << 20, MaxTotalSize: 4 << 20})
	if err == nil || !strings.Contains(err.Error(), "declare") {
		t.Fatalf("header check: %v", err)
	}
	// Same stream, header within limits: the inflater is cut at the budget.
	_, err = readZip(bytes.NewReader(data), int64(len(data)), Limits{MaxEntries: 10, MaxEntrySize: 4 << 20, MaxTotalSize: 1 << 30})
	if err == nil {
		t.Fatal("oversized entry accepted")
	}
}

func TestDirBundleSymlinkRefused(t *testing.T) {
	f := buildFixture(t)
	b := f.export(t, Filter{}, "full")
	os.Symlink("/etc/passwd", filepath.Join(b, "blobs", strings.Repeat("a", 64)))
	_, err := VerifyBundle(b, f.pub)
	checkKind(t, err, KindIO, "symlink")
}

func listTree(t testing.TB, dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return strings.Join(names, "\n")
}
