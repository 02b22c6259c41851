package main

import (
	"encoding/json"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/internal/printable"
)

// # What reaches the owner's terminal
//
// Nearly everything aerfs prints for the owner holds text a session or file
// content chose: paths, content, reasons, exe paths, session reports. Every
// command's standard output therefore goes through the one printable-text
// function (internal/printable): the text commands through a
// printable.Writer (controls, escape sequences, carriage returns, bidi
// characters escaped, long lines cut), their --json output through
// printable.JSON (the same JSON value, with what a terminal would interpret
// written as \u escapes). A field that must stay on its line (a path, a
// reason) is escaped with printable.Line where it is printed, so that a
// newline in it cannot print a line of its own. Errors go through Line in
// report.

// rawOutput are the commands whose output is not text for a terminal, or
// that escape it themselves: generated files (man pages, completion
// scripts, the report's HTML, bundles), the key, and watch (which colours
// its verdicts after escaping every field).
var rawOutput = []string{"aerfs man", "aerfs completion", "aerfs report", "aerfs export", "aerfs key",
	"aerfs owner-read", "aerfs watch", "aerfs run", "aerfs mount", "aerfs help"}

// printableOutput makes every command outside rawOutput print through a
// printable.Writer; the returned function flushes it once the command has
// run.
//
// On a terminal, below the printable writer, a command's lines may be
// coloured (colour.go) and paged (pager.go).
func printableOutput(root *cobra.Command) (flush func()) {
	var pw *printable.Writer
	var cw *colourWriter
	var pg *pager
	root.PersistentPreRun = func(c *cobra.Command, _ []string) {
		path := c.CommandPath()
		for _, r := range rawOutput {
			if path == r || strings.HasPrefix(path, r+" ") {
				return
			}
		}
		under := c.OutOrStdout()
		if f, ok := under.(*os.File); ok && f == os.Stdout && isTerminal(os.Stdout) {
			if pagedCommands[path] && !flagSet(c, "no-pager") && !flagSet(c, "follow") {
				if command := pagerCommand(); command != "" {
					if p, err := startPager(command); err == nil {
						pg, under = p, p
					}
				}
			}
			if colour := lineColours[path]; colour != nil && !flagSet(c, "json") && colourOn() {
				cw = &colourWriter{w: under, colour: colour}
				under = cw
			}
		}
		pw = printable.NewWriter(under)
		c.SetOut(pw)
	}
	return func() {
		if pw != nil {
			pw.Flush()
		}
		if cw != nil {
			cw.flush()
		}
		if pg != nil {
			pg.close()
		}
	}
}

// flagSet says whether c has a boolean flag name set to true.
func flagSet(c *cobra.Command, name string) bool {
	f := c.Flags().Lookup(name)
	return f != nil && f.Value.String() == "true"
}

// rawWriter is the writer under a printable.Writer: JSON is made safe by
// printable.JSON, not cut into lines.
func rawWriter(out io.Writer) io.Writer {
	if pw, ok := out.(*printable.Writer); ok {
		return pw.Raw()
	}
	return out
}

// writeJSON prints v as indented JSON, safe for a terminal and lossless.
func writeJSON(out io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeJSONBytes(out, b)
}

// writeJSONBytes prints JSON text (one value, a newline added) through
// printable.JSON.
func writeJSONBytes(out io.Writer, b []byte) error {
	_, err := rawWriter(out).Write(append(printable.JSON(b), '\n'))
	return err
}

// flushText writes what a printable.Writer holds of an unfinished line (a
// question waiting for its answer).
func flushText(out io.Writer) {
	if pw, ok := out.(*printable.Writer); ok {
		pw.Flush()
	}
}

// line is printable.Line: one field on one line of output.
func line(s string) string { return printable.Line(s) }

// escapeStrings applies printable.Line to every string reachable from v (a
// pointer to a struct, through nested structs, slices, maps' values and
// pointers): for a text made by code that prints its fields as they are
// (fs.Explanation.Text, what .aerfs/status shows the agent), so that a
// newline in a path cannot print a line of its own on the owner's terminal.
func escapeStrings(v any) {
	escapeValue(reflect.ValueOf(v))
}

func escapeValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			escapeValue(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				escapeValue(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			escapeValue(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			escapeValue(e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(printable.Line(v.String()))
		}
	}
}
