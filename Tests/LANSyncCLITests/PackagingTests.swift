import Foundation
import Testing

/// The container image and the Debian package, built and used for real on this machine: the
/// compose-style three-node group converging by mDNS alone in podman containers, and the .deb
/// installed with apt-get, checked, and purged. Each is skipped, with the reason, where it cannot
/// run (not root, no podman, no apt-get).
@Suite(.serialized) struct PackagingTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    static var isRoot: Bool { getuid() == 0 }
    static let podmanWorks: Bool = {
        guard isRoot, FileManager.default.isExecutableFile(atPath: "/usr/bin/podman") else { return false }
        return (try? CLI.shell("podman --runtime runc --cgroup-manager cgroupfs info >/dev/null 2>&1")) == 0
    }()
    static let aptWorks = isRoot && FileManager.default.isExecutableFile(atPath: "/usr/bin/apt-get")
    /// The statically linked binary scripts/test builds before `swift test` (a build from inside
    /// the tests would wait forever for SwiftPM's lock, which `swift test` holds).
    static let staticBinary = root + "/.build/lansync-static-debug"
    static var haveStaticBinary: Bool { FileManager.default.isExecutableFile(atPath: staticBinary) }

    /// Runs a shell command in the project root; returns its status and everything it printed.
    static func run(_ command: String) async throws -> (status: Int32, output: String) {
        let log = NSTemporaryDirectory() + "lansync-packaging-\(UUID().uuidString).log"
        defer { try? FileManager.default.removeItem(atPath: log) }
        let status = try await CLI.shell("cd '\(root)' && (\(command)) >'\(log)' 2>&1")
        return (status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    @Test(
        .enabled(
            if: podmanWorks,
            "podman does not run here (needs root, podman and runc: scripts/setup installs them)"
        ),
        .enabled(
            if: haveStaticBinary,
            "no .build/lansync-static-debug: scripts/test builds it (scripts/static-binary debug)"
        )
    )
    func threeContainersConvergeByDiscoveryAloneAndAStoppedOneCatchesUp() async throws {
        let result = try await Self.run("LANSYNC_BINARY='\(Self.staticBinary)' scripts/container-test")
        #expect(result.status == 0, "\(result.output.suffix(3000))")
        let figures = result.output.split(separator: "\n").last.map(String.init) ?? ""
        let object = try JSONSerialization.jsonObject(with: Data(figures.utf8)) as? [String: Any]
        #expect((object?["up_to_equal_s"] as? Double ?? 999) < 60, "\(figures)")
        print("container test: \(figures)")
    }

    @Test(
        .enabled(if: aptWorks, "apt-get cannot install packages here (needs root)"),
        .enabled(
            if: haveStaticBinary,
            "no .build/lansync-static-debug: scripts/test builds it (scripts/static-binary debug)"
        )
    )
    func theDebianPackageInstallsRunsAndPurgesCleanly() async throws {
        // A run killed between install and purge leaves the package, its user and its directories
        // behind, marked as this test's own: remove them first, as the namespace tests do.
        _ = try await Self.run("[ -e \(Self.packageMarker) ] && \(Self.removeTestInstall)")
        // Not on a machine where LANSync is installed for real (a package, scripts/install-service):
        // this test installs, purges and then deletes the lansync user and /var/lib/lansync.
        let clean = try await Self.run(
            "! dpkg -s lansync >/dev/null 2>&1 && ! getent passwd lansync && [ ! -e /var/lib/lansync ] && [ ! -e /etc/lansync ]"
        )
        guard clean.status == 0 else {
            Issue.record(
                "LANSync is installed on this machine already (package, user, /var/lib/lansync or /etc/lansync), not by this test; this test would remove it"
            )
            return
        }
        let build = try await Self.run(
            "rm -f lansync_*.deb && LANSYNC_DEB_FAST=1 LANSYNC_BINARY='\(Self.staticBinary)' scripts/package-deb"
        )
        #expect(build.status == 0, "\(build.output.suffix(2000))")
        // The marker goes down before the install, so no moment leaves an unmarked install behind.
        #expect(try await Self.run("touch \(Self.packageMarker)").status == 0)
        // A defer cannot wait asynchronously; this short cleanup blocks its thread for a moment.
        defer {
            _ = try? CLI.shell("cd '\(Self.root)' && (\(Self.removeTestInstall); rm -f lansync_*.deb) >/dev/null 2>&1")
        }
        let install = try await Self.run("DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ./lansync_*.deb")
        #expect(install.status == 0, "\(install.output.suffix(2000))")
        #expect(
            try await Self.run("/usr/bin/lansync --version").output.trimmingCharacters(in: .whitespacesAndNewlines)
                == "0.1.0"
        )
        let verify = try await Self.run("systemd-analyze verify /lib/systemd/system/lansync.service")
        #expect(verify.status == 0, "\(verify.output)")
        for path in [
            "/etc/lansync/lansync.conf", "/usr/share/bash-completion/completions/lansync",
            "/usr/share/zsh/vendor-completions/_lansync",
            "/usr/share/fish/vendor_completions.d/lansync.fish", "/usr/share/man/man1/lansync.1.gz",
            "/usr/share/man/man1/lansync.run.1.gz",
        ] {
            #expect(FileManager.default.fileExists(atPath: path), "\(path)")
        }
        #expect(try await Self.run("getent passwd lansync").status == 0, "postinst makes the lansync user")
        #expect(
            try await Self.run("test \"$(stat -c %a:%U /var/lib/lansync)\" = 700:lansync").status == 0,
            "the data directory, owner-only"
        )
        // The service user can set the node up with the shipped config.
        let setup = try await Self.run(
            "runuser -u lansync -- lansync --config /etc/lansync/lansync.conf init --name package-test"
        )
        #expect(setup.status == 0, "\(setup.output)")
        let files = try await Self.run("dpkg -L lansync").output.split(separator: "\n").map(String.init)
        let purge = try await Self.run("DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq lansync")
        #expect(purge.status == 0, "\(purge.output)")
        let left = files.filter { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        #expect(left.isEmpty, "files left after purge: \(left)")
        #expect(!FileManager.default.fileExists(atPath: "/etc/lansync"), "purge removes /etc/lansync")
        // The data directory stays (documented): the device's identity and every log in it.
        #expect(FileManager.default.fileExists(atPath: "/var/lib/lansync/identity.json"))
    }

    /// Marks an install as this test's own while it lasts, outside every path the package owns.
    static let packageMarker = "/var/tmp/lansync-packaging-test"

    /// Removes what the package test installed: the package, the data it keeps after a purge,
    /// its user, and last the marker.
    static let removeTestInstall =
        "{ DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq lansync >/dev/null 2>&1; rm -rf /var/lib/lansync /etc/lansync; userdel lansync 2>/dev/null; rm -f \(packageMarker); }"
}
