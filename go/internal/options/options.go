// Package options reads `--grpc-option KEY=VALUE` by grpc-go's names, the same
// names labkit/echo/options.py documents, and turns them into grpc-go server
// and dial options. Unknown keys, bad values and keys of the other side are
// one-line errors, so an experiment never believes it set a knob it did not.
package options

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"labkit/go/internal/units"
)

// Kind says how an option's value reads.
type Kind int

const (
	Size Kind = iota
	Duration
	Boolean
	Count
	Compression
	Codec
)

// Option is one knob: who takes it and how its value reads.
type Option struct {
	Name    string
	Kind    Kind
	Client  bool
	Server  bool
	Meaning string
}

// Known lists every option, by name (as labkit/echo/options.py OPTIONS).
var Known = map[string]Option{}

func init() {
	for _, o := range []Option{
		{"initial-window", Size, true, true, "HTTP/2 initial stream flow-control window, bytes (BDP estimation may grow it)"},
		{"initial-conn-window", Size, true, true, "HTTP/2 initial connection flow-control window, bytes"},
		{"static-stream-window", Size, true, true, "HTTP/2 stream window fixed at this size, BDP estimation off"},
		{"static-conn-window", Size, true, true, "HTTP/2 connection window fixed at this size, BDP estimation off"},
		{"read-buffer", Size, true, true, "bytes read from the socket at a time"},
		{"write-buffer", Size, true, true, "bytes gathered before writing to the socket"},
		{"keepalive-time", Duration, true, true, "send an HTTP/2 PING after this long without activity"},
		{"keepalive-timeout", Duration, true, true, "close the connection when a keepalive PING is not answered within this"},
		{"keepalive-permit-without-stream", Boolean, true, true, "keepalive PINGs also while no call is active"},
		{"max-connection-idle", Duration, false, true, "the server closes a connection without calls for this long"},
		{"max-connection-age", Duration, false, true, "the server closes any connection this old (gracefully)"},
		{"keepalive-min-time", Duration, false, true, "the server's enforcement: the shortest PING interval it accepts"},
		{"max-concurrent-streams", Count, false, true, "streams the server allows at once on one connection"},
		{"max-recv-msg-size", Size, true, true, "largest message accepted, bytes"},
		{"max-send-msg-size", Size, true, true, "largest message sent, bytes"},
		{"pool", Count, true, false, "connections (channels) the client spreads its calls over, round robin"},
		{"compression", Compression, true, true, "message compression: gzip or none"},
		{"codec", Codec, true, true, "message marshalling: proto (grpc-go's own) or vtproto (vtprotobuf's generated code)"},
	} {
		Known[o.Name] = o
	}
}

// Values are parsed options: sizes and counts as int64, durations as time.Duration,
// booleans as bool, compression and codec as string.
type Values map[string]any

// Parse reads KEY=VALUE items for side ("client" or "server").
func Parse(items []string, side string) (Values, error) {
	values := Values{}
	for _, item := range items {
		key, text, found := strings.Cut(item, "=")
		key, text = strings.TrimSpace(key), strings.TrimSpace(text)
		if !found || text == "" {
			return nil, fmt.Errorf("--grpc-option %q is not KEY=VALUE", item)
		}
		option, ok := Known[key]
		if !ok {
			return nil, fmt.Errorf("--grpc-option %s: unknown; known: %s", key, strings.Join(Names(), ", "))
		}
		if (side == "client" && !option.Client) || (side == "server" && !option.Server) {
			return nil, fmt.Errorf("--grpc-option %s is a %s option, not a %s one", key, option.sides(), side)
		}
		value, err := option.parse(text)
		if err != nil {
			return nil, fmt.Errorf("--grpc-option %s: %v", key, err)
		}
		values[key] = value
	}
	return values, nil
}

// Names are the known option names, sorted.
func Names() []string {
	names := make([]string, 0, len(Known))
	for name := range Known {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (o Option) sides() string {
	switch {
	case o.Client && o.Server:
		return "client and server"
	case o.Client:
		return "client"
	}
	return "server"
}

func (o Option) parse(text string) (any, error) {
	switch o.Kind {
	case Size:
		return units.ParseSize(text)
	case Duration:
		d, err := units.ParseDuration(text)
		if err == nil && d < time.Millisecond {
			d = time.Millisecond // as options.py: whole milliseconds, at least one
		}
		return d, err
	case Boolean:
		switch strings.ToLower(text) {
		case "true", "1", "yes", "on":
			return true, nil
		case "false", "0", "no", "off":
			return false, nil
		}
		return nil, fmt.Errorf("%q is not true or false", text)
	case Count:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", text)
		}
		if n < 1 {
			return nil, fmt.Errorf("%d must be at least 1", n)
		}
		return n, nil
	case Codec:
		if text != "proto" && text != "vtproto" {
			return nil, fmt.Errorf("%q is not proto or vtproto", text)
		}
		return text, nil
	}
	if text != "gzip" && text != "none" {
		return nil, fmt.Errorf("%q is not gzip or none", text)
	}
	return text, nil
}

// Text is the options as one label, key=value;key=value (sorted), as options_text in Python.
func (v Values) Text() string {
	keys := make([]string, 0, len(v))
	for key := range v {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, key := range keys {
		parts[i] = fmt.Sprintf("%s=%v", key, v.jsonValue(key))
	}
	return strings.Join(parts, ";")
}

// JSON is the options as the ready line reports them: sizes and counts as numbers,
// durations in milliseconds, as Python's parsed values.
func (v Values) JSON() map[string]any {
	out := map[string]any{}
	for key := range v {
		out[key] = v.jsonValue(key)
	}
	return out
}

func (v Values) jsonValue(key string) any {
	if d, ok := v[key].(time.Duration); ok {
		return d.Milliseconds()
	}
	return v[key]
}
