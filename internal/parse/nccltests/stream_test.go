package nccltests

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/internal/fixture"
)

// streamInChunks writes s to a new Stream in chunks of n bytes (n <= 0: all at once) and
// returns its Result and the rows onRow saw.
func streamInChunks(t testing.TB, s string, n int) (Result, []Row) {
	t.Helper()
	var rows []Row
	st := NewStream(func(r Row) { rows = append(rows, r) })
	b := []byte(s)
	if n <= 0 {
		n = max(len(b), 1)
	}
	for len(b) > 0 {
		k := min(n, len(b))
		w, err := st.Write(b[:k])
		if err != nil || w != k {
			t.Fatalf("Write(%d bytes) = %d, %v", k, w, err)
		}
		b = b[k:]
	}
	return st.Result(), rows
}

// rowsOfLastTable keeps the rows onRow reported for the table Result describes.
func rowsOfLastTable(rows []Row, table int) []Row {
	var out []Row
	for _, r := range rows {
		if r.Table == table {
			out = append(out, r)
		}
	}
	return out
}

// TestStreamMatchesParse checks that for every fixture, Parse and a Stream fed in 1-byte,
// 7-byte, 4 KiB and whole chunks give the same Result, and that onRow saw exactly the rows of
// that Result, in order.
func TestStreamMatchesParse(t *testing.T) {
	inputs := map[string]string{
		"overlong line": strings.Repeat("x", 3*MaxLineBytes) + "\n# Out of bounds values : 0 OK\n",
		"line of exactly MaxLineBytes": strings.Repeat("y", MaxLineBytes) + "\n" + header219 +
			"        1024           256     float     sum      -1    20.10    0.05    0.09      0    20.20    0.05    0.09      0\n",
		"no trailing newline": header219 + "# Out of bounds values : 0 OK",
		"CRLF":                "h:1:1 [0] NCCL INFO Using network Libfabric\r\n# Out of bounds values : 0 OK\r\n",
	}
	for _, name := range fixture.Names(t, ".txt") {
		inputs[name] = fixture.Read(t, name)
	}
	for name, in := range inputs {
		want, err := ParseString(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, chunk := range []int{1, 7, 4096, 0} {
			t.Run(fmt.Sprintf("%s/chunk=%d", name, chunk), func(t *testing.T) {
				got, rows := streamInChunks(t, in, chunk)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("stream result differs from Parse:\n got %+v\nwant %+v", got, want)
				}
				if last := rowsOfLastTable(rows, want.Tables); want.RowsDropped == 0 && !reflect.DeepEqual(last, want.Rows) {
					t.Errorf("onRow saw %d rows of table %d, Result has %d", len(last), want.Tables, len(want.Rows))
				}
			})
		}
	}
}

// TestStreamOnRow checks the callback across two tables and beyond MaxRows.
func TestStreamOnRow(t *testing.T) {
	row := func(size int) string {
		return fmt.Sprintf("%12d  %12d     float     sum      -1    20.10    0.05    0.09      0    20.20    0.05    0.09      0\n", size, size/4)
	}
	var b strings.Builder
	b.WriteString(header219 + row(8) + row(16) + "# Out of bounds values : 0 OK\n" + header219)
	for i := 1; i <= MaxRows+2; i++ {
		b.WriteString(row(i * 8))
	}
	var seen []Row
	st := NewStream(func(r Row) { seen = append(seen, r) })
	if _, err := st.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	res := st.Result()
	if len(seen) != 2+MaxRows+2 {
		t.Fatalf("onRow called %d times, want %d (every row, also those Result drops)", len(seen), 2+MaxRows+2)
	}
	if seen[0].Table != 1 || seen[1].Table != 1 || seen[2].Table != 2 || seen[0].SizeBytes != 8 || seen[1].SizeBytes != 16 {
		t.Errorf("first rows = %+v, %+v, %+v", seen[0], seen[1], seen[2])
	}
	if res.Tables != 2 || len(res.Rows) != MaxRows || res.RowsDropped != 2 {
		t.Errorf("tables=%d rows=%d dropped=%d", res.Tables, len(res.Rows), res.RowsDropped)
	}
	if !reflect.DeepEqual(seen[2:2+MaxRows], res.Rows) {
		t.Errorf("onRow rows of table 2 differ from Result.Rows")
	}
	if last := seen[len(seen)-1]; last.SizeBytes != int64((MaxRows+2)*8) || res.Largest == nil || res.Largest.SizeBytes != last.SizeBytes {
		t.Errorf("last row %d, Largest %+v", last.SizeBytes, res.Largest)
	}
}

// TestStreamBoundedBuffer checks that a stream without newlines never holds more than
// MaxLineBytes, and that such a line is read once, cut.
func TestStreamBoundedBuffer(t *testing.T) {
	st := NewStream(nil)
	chunk := []byte(strings.Repeat("z", 1000))
	for i := 0; i < 1000; i++ { // 1 MB, no newline
		if _, err := st.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if cap(st.partial) > MaxLineBytes {
			t.Fatalf("after %d KB the stream holds a %d-byte buffer", i+1, cap(st.partial))
		}
	}
	if _, err := st.Write([]byte("\nUsing network Socket\n")); err != nil {
		t.Fatal(err)
	}
	r := st.Result()
	if r.Lines != 2 || !r.Transport.Socket {
		t.Errorf("Lines = %d, Socket = %v: want the overlong line once and the next line read", r.Lines, r.Transport.Socket)
	}
}

func TestStreamAfterResult(t *testing.T) {
	st := NewStream(nil)
	if _, err := st.Write([]byte("# Out of bounds values : 0 OK")); err != nil {
		t.Fatal(err)
	}
	first := st.Result()
	if first.OutOfBounds == nil || first.Lines != 1 {
		t.Fatalf("the unterminated last line was not read: %+v", first)
	}
	n, err := st.Write([]byte("# Out of bounds values : 3 FAILED\n"))
	if n != 0 || err == nil || !strings.Contains(err.Error(), "after Result") {
		t.Errorf("Write after Result = %d, %v; want 0 and an error naming the misuse", n, err)
	}
	if again := st.Result(); !reflect.DeepEqual(again, first) {
		t.Errorf("second Result differs: %+v", again)
	}
}

// FuzzStream checks that a Stream fed in chunks of a fuzzed size agrees with Parse, and that
// onRow reports the kept rows of the last table.
func FuzzStream(f *testing.F) {
	seedFromTestdata(f, func(s string) { f.Add(s, uint16(7)) })
	f.Add(header219+"        1024           256     float     sum      -1    20.10    0.05    0.09      0    20.20    0.05    0.09      0\r\n", uint16(1))
	f.Fuzz(func(t *testing.T, s string, chunk uint16) {
		want, err := ParseString(s)
		if err != nil {
			t.Fatal(err)
		}
		got, rows := streamInChunks(t, s, int(chunk%512)+1)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("stream in %d-byte chunks differs from Parse:\n got %+v\nwant %+v", int(chunk%512)+1, got, want)
		}
		if last := rowsOfLastTable(rows, want.Tables); want.RowsDropped == 0 && !reflect.DeepEqual(last, want.Rows) {
			t.Fatalf("onRow saw %d rows of the last table, Result has %d", len(last), len(want.Rows))
		}
	})
}
