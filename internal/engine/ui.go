package engine

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
)

// uiWriter streams a command's output to the Packer UI line by line.
type uiWriter struct {
	mu  sync.Mutex
	ui  UI
	buf []byte
}

func (w *uiWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.ui.Message(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

// Flush prints a final line without a newline.
func (w *uiWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.ui.Message(string(w.buf))
		w.buf = nil
	}
}

// tailWriter keeps the last max bytes written to it, so a long layer's output costs bounded
// memory while its end stays available for the report.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailWriter(max int) *tailWriter { return &tailWriter{max: max} }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - 2*w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// rowPrinter shows each all_reduce_perf result row in the UI as it arrives, so a
// multi-minute NCCL run shows where it is. The rows are parsed by package nccltests.
type rowPrinter struct {
	ui     UI
	stream *nccltests.Stream
}

func newRowPrinter(ui UI) *rowPrinter {
	p := &rowPrinter{ui: ui}
	p.stream = nccltests.NewStream(func(r nccltests.Row) {
		busbw := "N/A"
		if r.OutOfPlace.BusBW != nil {
			busbw = strconv.FormatFloat(*r.OutOfPlace.BusBW, 'f', 2, 64) + " GB/s"
		}
		t := "N/A"
		if r.OutOfPlace.TimeUS != nil {
			t = strconv.FormatFloat(*r.OutOfPlace.TimeUS, 'f', 1, 64) + " us"
		}
		ui.Message(fmt.Sprintf("dlami: nccl all_reduce %12d B  time %12s  busbw %12s", r.SizeBytes, t, busbw))
	})
	return p
}

func (p *rowPrinter) Write(b []byte) (int, error) { return p.stream.Write(b) }

// Flush ends the stream (a last row without a newline is still shown).
func (p *rowPrinter) Flush() { _ = p.stream.Result() }
