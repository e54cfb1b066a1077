package linkpath

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// openTUN creates TUN device ifname inside the network namespace at netnsPath and returns its
// non-blocking fd. IFF_VNET_HDR puts a virtio-net header before every packet; with offload, the
// kernel may hand over (and accept) TCP super-packets of up to 64 KiB, checksums left partial.
// The device is not persistent: it goes away with the fd, so a crashed emulator leaves none.
func openTUN(netnsPath, ifname string, offload bool) (int, error) {
	type result struct {
		fd  int
		err error
	}
	done := make(chan result, 1)
	go func() {
		// setns moves only this OS thread; it stays locked (and is thrown away when the
		// goroutine ends) in case moving back fails.
		runtime.LockOSThread()
		fd, err := openTUNHere(netnsPath, ifname, offload)
		done <- result{fd, err}
	}()
	r := <-done
	return r.fd, r.err
}

func openTUNHere(netnsPath, ifname string, offload bool) (int, error) {
	home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(home)
	target, err := unix.Open(netnsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("network namespace %s: %w", netnsPath, err)
	}
	err = unix.Setns(target, unix.CLONE_NEWNET)
	unix.Close(target)
	if err != nil {
		return -1, fmt.Errorf("setns %s: %w", netnsPath, err)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err == nil {
		err = configureTUN(fd, ifname, offload)
		if err != nil {
			unix.Close(fd)
			fd = -1
		}
	}
	if backErr := unix.Setns(home, unix.CLONE_NEWNET); backErr != nil && err == nil {
		err = backErr
	}
	return fd, err
}

func configureTUN(fd int, ifname string, offload bool) error {
	ifr, err := unix.NewIfreq(ifname)
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("TUNSETIFF %s: %w", ifname, err)
	}
	flags := 0
	if offload {
		// Only IPv4 TCP: the testbed's data path is IPv4, and splitTCP4 is what cuts a
		// super-packet where the link model decides per packet.
		flags = unix.TUN_F_CSUM | unix.TUN_F_TSO4
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, flags); err != nil {
		return fmt.Errorf("TUNSETOFFLOAD %s: %w", ifname, err)
	}
	return nil
}
