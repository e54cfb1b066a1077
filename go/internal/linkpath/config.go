package linkpath

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"

	"labkit/go/internal/link"
)

// Config is what labkit/testbed/lab.py writes to STATE/link.json: the hosts, each direction's
// parameters and timeline, and where to export counters. SIGHUP re-reads it.
type Config struct {
	Generation int    `json:"generation"` // bumped by every change; the status file echoes it
	Seed       uint64 `json:"seed"`
	Offload    bool   `json:"offload"`     // TSO super-packets through the TUN devices
	SpinNs     int64  `json:"spin_ns"`     // busy-wait this long before a due time instead of sleeping
	Realtime   bool   `json:"realtime"`    // nice -20 and exact timers for the data-path threads
	StatsPath  string `json:"stats_path"`  // one JSON line per second with activity
	StatusPath string `json:"status_path"` // totals, rewritten every second
	// ScheduleOriginUTCNs is when the timelines' times count from (wall clock, ns).
	ScheduleOriginUTCNs int64        `json:"schedule_origin_utc_ns"`
	Hosts               []HostConfig `json:"hosts"`
	Directions          []DirConfig  `json:"directions"`
}

// HostConfig is one host's data device.
type HostConfig struct {
	Name    string `json:"name"`
	Netns   string `json:"netns"` // path of the namespace, e.g. /var/run/netns/labkit-x-a
	Ifname  string `json:"ifname"`
	Address string `json:"address"` // its IPv4 data address; packets to it go to this host
}

// DirConfig is one direction of one link.
type DirConfig struct {
	From     string       `json:"from"`
	To       string       `json:"to"`
	Params   link.Params  `json:"params"`
	Timeline []link.Timed `json:"timeline"`
}

// Key names a direction in the exported counters: "a>b".
func (d DirConfig) Key() string { return d.From + ">" + d.To }

// LoadConfig reads and checks a config file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, c.Validate()
}

// Validate checks the hosts and every direction's parameters.
func (c *Config) Validate() error {
	names := map[string]bool{}
	for _, h := range c.Hosts {
		if _, err := netip.ParseAddr(h.Address); err != nil || !netip.MustParseAddr(h.Address).Is4() {
			return fmt.Errorf("host %s: %q is not an IPv4 address", h.Name, h.Address)
		}
		if names[h.Name] {
			return fmt.Errorf("host %s appears twice", h.Name)
		}
		names[h.Name] = true
	}
	if len(c.Hosts) < 2 {
		return errors.New("a link needs at least two hosts")
	}
	seen := map[string]bool{}
	for _, d := range c.Directions {
		if !names[d.From] || !names[d.To] || d.From == d.To {
			return fmt.Errorf("direction %s joins unknown hosts", d.Key())
		}
		if seen[d.Key()] {
			return fmt.Errorf("direction %s appears twice", d.Key())
		}
		seen[d.Key()] = true
		for i, p := range append([]link.Params{d.Params}, timelineParams(d.Timeline)...) {
			if err := p.Validate(); err != nil {
				return fmt.Errorf("direction %s (timeline entry %d): %w", d.Key(), i, err)
			}
		}
	}
	return nil
}

func timelineParams(t []link.Timed) []link.Params {
	out := make([]link.Params, len(t))
	for i := range t {
		out[i] = t[i].Params
	}
	return out
}
