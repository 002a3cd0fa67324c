import ArgumentParser
import Foundation
import LANSync
import LANSyncAgent
import LANSyncDiscovery

struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check what usually goes wrong, and say what to do about each problem.",
        discussion: """
            Checks the data directory's permissions, the identity and group, the replica file (SQLite's integrity check, which only LANSync can run on it: its app tables call a function other programs lack), app-table rows whose parent row is missing (orphans), the agent, avahi-daemon, network interfaces that can carry multicast (mDNS), a firewall closing LANSync's port or mDNS, clocks that disagree with peers', peers refused and why, and a device ID shared with a cloned machine. Each line is ok, warn or FAIL, with the fix under it. Exits 1 when anything failed.

            Examples:
              lansync doctor
              sudo -u lansync lansync doctor      (the service's node)
            """
    )

    @OptionGroup var global: GlobalOptions

    enum Verdict: String { case ok, warn, fail = "FAIL" }

    struct Finding {
        let verdict: Verdict
        let text: String
        var fix: String?
        /// The node could not be opened: the checks that need it were not made.
        var isUnusableNode = false
    }

    func run() async throws {
        // A node in several groups is checked group by group, unless --group names one.
        let groups = global.group == nil ? ((try? NodeGroups.list(in: global.nodeDirectory)) ?? []) : []
        var findings = [Finding]()
        var ports: [Int] = []
        if groups.count > 1 {
            findings += Self.checkPermissions(global.nodeDirectory)
            for group in groups {
                findings.append(Finding(verdict: .ok, text: "group \(group.name) (tag \(group.tag)):"))
                let (found, port) = await checks(of: group.directory)
                findings += found.map { Finding(verdict: $0.verdict, text: "  " + $0.text, fix: $0.fix) }
                ports += port.map { [$0] } ?? []
            }
        } else {
            let directory: DataDirectory
            do {
                directory = try global.selectedDirectory()
            } catch {
                findings.append(
                    Finding(verdict: .fail, text: error.message, fix: "`lansync groups` lists this node's groups")
                )
                Self.print(findings)
                throw ExitCode(1)
            }
            findings += Self.checkPermissions(directory)
            let (found, port) = await checks(of: directory)
            findings += found
            ports += port.map { [$0] } ?? []
            if found.contains(where: { $0.isUnusableNode }) {
                Self.print(findings)
                throw ExitCode(1)
            }
        }
        findings += Self.checkMulticastInterfaces()
        for port in ports.isEmpty ? [AgentConfiguration.defaultPort] : ports {
            findings += Self.checkFirewall(port: port)
        }
        Self.print(findings)
        if findings.contains(where: { $0.verdict == .fail }) { throw ExitCode(1) }
    }

    /// The checks of one group's replica and agent, and the port its agent listens on.
    private func checks(of directory: DataDirectory) async -> ([Finding], Int?) {
        var findings = [Finding]()
        let node: LANSyncNode
        do {
            node = try global.openNode(at: directory)
            findings.append(
                Finding(
                    verdict: .ok,
                    text: "node \(node.identity.name) (\(node.deviceID)) in \(node.dataDirectory.path)"
                )
            )
        } catch {
            findings.append(
                Finding(
                    verdict: .fail,
                    text: "no usable node in \(directory.path): \(error)",
                    fix: "`lansync init --name NAME` (or --data-dir to point at the right directory)",
                    isUnusableNode: true
                )
            )
            return (findings, nil)
        }
        findings.append(Self.checkIntegrity(node))
        findings.append(Self.checkOpenClaims(node))
        if let orphans = Self.checkOrphans(node) { findings.append(orphans) }
        if let tag = try? node.group()?.tag {
            findings.append(Finding(verdict: .ok, text: "in group \(tag)"))
        } else {
            findings.append(
                Finding(
                    verdict: .fail,
                    text: "in no group: this node syncs with nobody",
                    fix: "`lansync group create` on the first device, `lansync group join CODE` on the others"
                )
            )
        }
        let report = await ControlClient.report(node.dataDirectory)
        if let report {
            findings.append(Finding(verdict: .ok, text: "agent running, listening on port \(report.port)"))
        } else {
            findings.append(
                Finding(
                    verdict: .warn,
                    text: "no agent running: nothing syncs until one does",
                    fix: "`lansync run` (or `sudo systemctl start lansync` for the service)"
                )
            )
        }
        findings += await Self.checkDiscovery(report)
        findings += Self.checkPeers(report?.peers ?? ControlClient.savedPeers(node.dataDirectory))
        if let duplicate = report?.duplicateDeviceID {
            findings.append(Finding(verdict: .fail, text: "duplicate device ID", fix: duplicate))
        }
        return (findings, report?.port)
    }

    /// App-table rows whose parent is missing (`LANSyncNode.orphans`); nil when the app declares
    /// no tables.
    static func checkOrphans(_ node: LANSyncNode) -> Finding? {
        guard let tables = try? node.appliedSchemaTables(), !tables.isEmpty else { return nil }
        guard let orphans = try? node.orphans() else {
            return Finding(verdict: .warn, text: "could not look for orphan rows")
        }
        guard !orphans.isEmpty else { return Finding(verdict: .ok, text: "no orphan rows in the app's tables") }
        let listed = orphans.prefix(10).map {
            "\($0.table) (\($0.key.joined(separator: ", "))) lacks its \($0.parent) row"
        }
        return Finding(
            verdict: .warn,
            text: "\(orphans.count) orphan row\(orphans.count == 1 ? "" : "s"): " + listed.joined(separator: "; ")
                + (orphans.count > 10 ? "; …" : ""),
            fix:
                "its parent was deleted on another device while it was added here (or never written): delete the orphan "
                + "(`lansync exec`) or insert its parent again; `GET /v1/orphans` lists them all"
        )
    }

    /// SQLite's `PRAGMA integrity_check` on the replica, through LANSync's connection.
    static func checkIntegrity(_ node: LANSyncNode) -> Finding {
        let fix =
            "stop the agent, move the data directory aside and set this device up again (`lansync init`, `lansync group join`): "
            + "peers send back everything they hold; `lansync export` on the old directory may save what only this device had"
        do {
            let problems = try node.store.integrityProblems()
            guard problems.isEmpty else {
                return Finding(
                    verdict: .fail,
                    text: "replica file damaged: \(problems.prefix(3).joined(separator: "; "))",
                    fix: fix
                )
            }
            return Finding(verdict: .ok, text: "replica file intact (SQLite's integrity check)")
        } catch {
            return Finding(verdict: .fail, text: "the replica file could not be checked: \(error)", fix: fix)
        }
    }

    /// Changes a peer said lost that have not lost here (protocol §12.4): normal while a catch-up
    /// runs (what superseded them is on its way); once in sync with every peer, a peer made the
    /// loss up and a value is missing here.
    static func checkOpenClaims(_ node: LANSyncNode) -> Finding {
        guard let claims = try? node.store.openClaims() else {
            return Finding(verdict: .warn, text: "open loss claims could not be read")
        }
        guard !claims.isEmpty else { return Finding(verdict: .ok, text: "no open loss claims") }
        return Finding(
            verdict: .warn,
            text:
                "changes of \(claims.count) replica\(claims.count == 1 ? "" : "s") that a peer said lost have not lost here yet",
            fix:
                "keep the agent running until `lansync peers` shows every peer in sync: the agent asks them for those changes "
                + "again; a warning that stays then means a peer passed a live change off as lost (`lansync run --log-level debug` names the peer)"
        )
    }

    static func print(_ findings: [Finding]) {
        let out = Output()
        for finding in findings {
            out.line("\(finding.verdict.rawValue.padding(toLength: 4, withPad: " ", startingAt: 0))  \(finding.text)")
            if let fix = finding.fix, finding.verdict != .ok { out.line("      fix: \(fix)") }
        }
        let failed = findings.filter { $0.verdict == .fail }.count
        let warned = findings.filter { $0.verdict == .warn }.count
        out.line(
            failed + warned == 0 ? "all checks passed" : "\(failed) failed, \(warned) warning\(warned == 1 ? "" : "s")"
        )
    }

    static func checkPermissions(_ directory: DataDirectory) -> [Finding] {
        let manager = FileManager.default
        guard let attributes = try? manager.attributesOfItem(atPath: directory.path) else { return [] }
        var findings = [Finding]()
        let mode = (attributes[.posixPermissions] as? Int) ?? 0
        if mode & 0o077 != 0 {
            findings.append(
                Finding(
                    verdict: .fail,
                    text: "data directory \(directory.path) is readable by others (mode \(String(mode, radix: 8)))",
                    fix: "chmod 700 \(directory.path)"
                )
            )
        }
        if let owner = attributes[.ownerAccountID] as? Int, owner != Int(getuid()) {
            findings.append(
                Finding(
                    verdict: .fail,
                    text: "data directory \(directory.path) belongs to another user (uid \(owner))",
                    fix: "run lansync as its owner (e.g. `sudo -u lansync lansync …` for the service), or chown it"
                )
            )
        }
        for name in ["identity.json", "group.json", "replica.sqlite", "replica.sqlite-wal", "peers.json"] {
            let path = directory.path + "/" + name
            guard let file = try? manager.attributesOfItem(atPath: path) else { continue }
            let fileMode = (file[.posixPermissions] as? Int) ?? 0
            if fileMode & 0o077 != 0 {
                findings.append(
                    Finding(
                        verdict: .fail,
                        text: "\(path) is readable by others (mode \(String(fileMode, radix: 8)))",
                        fix: "chmod 600 \(path)"
                    )
                )
            }
        }
        if findings.isEmpty { findings.append(Finding(verdict: .ok, text: "data directory is private to its owner")) }
        return findings
    }

    static func checkDiscovery(_ report: AgentReport?) async -> [Finding] {
        let install = "`sudo apt install avahi-daemon && sudo systemctl enable --now avahi-daemon`"
        if let discovery = report?.discovery {
            switch discovery.state {
            case "off":
                return [
                    Finding(
                        verdict: .warn,
                        text: "mDNS discovery is off (--no-mdns or `mdns = off`): only static peers sync"
                    )
                ]
            case "unavailable":
                return [
                    Finding(
                        verdict: .fail,
                        text: "avahi-daemon: \(discovery.detail ?? "unavailable"); peers are not discovered",
                        fix: install
                    )
                ]
            default:
                return [
                    Finding(
                        verdict: .ok,
                        text:
                            "mDNS: advertised as '\(discovery.advertisedAs ?? "-")', \(discovery.sameGroup) node(s) of this group seen"
                    )
                ]
            }
        }
        if let problem = await MDNSDiscovery.probe() {
            return [
                Finding(verdict: .fail, text: "avahi-daemon: \(problem); peers will not be discovered", fix: install)
            ]
        }
        return [Finding(verdict: .ok, text: "avahi-daemon is running")]
    }

    /// Interfaces that are up, not loopback, and can multicast: without one, mDNS cannot work.
    static func checkMulticastInterfaces() -> [Finding] {
        let root = "/sys/class/net"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        let usable = names.sorted().filter { name in
            guard let text = try? String(contentsOfFile: "\(root)/\(name)/flags", encoding: .utf8),
                let flags = Int(text.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst(2), radix: 16)
            else { return false }
            let up = 0x1
            let loopback = 0x8
            let multicast = 0x1000
            return flags & up != 0 && flags & loopback == 0 && flags & multicast != 0
        }
        if usable.isEmpty {
            return [
                Finding(
                    verdict: .fail,
                    text: "no network interface is up with multicast: mDNS cannot reach anyone",
                    fix:
                        "connect to the network (or `ip link set DEV multicast on`); where multicast is blocked, use `--peer HOST:PORT`"
                )
            ]
        }
        return [Finding(verdict: .ok, text: "multicast-capable interfaces: \(usable.joined(separator: ", "))")]
    }

    /// Reads the firewall (nftables or iptables) for an input policy of drop that opens neither
    /// LANSync's port nor mDNS (UDP 5353).
    static func checkFirewall(port: Int) -> [Finding] {
        var rules: String?
        for command in [["nft", "list", "ruleset"], ["iptables", "-S", "INPUT"]] {
            if let output = run(command), !output.isEmpty {
                rules = output
                break
            }
        }
        guard let rules else {
            return [Finding(verdict: .ok, text: "no firewall rules found (or not readable without root)")]
        }
        let dropsInput =
            rules.contains("hook input") && rules.contains("policy drop") || rules.contains("-P INPUT DROP")
        guard dropsInput else {
            return [Finding(verdict: .ok, text: "the firewall does not drop incoming traffic by default")]
        }
        var findings = [Finding]()
        if !rules.contains("\(port)") {
            findings.append(
                Finding(
                    verdict: .fail,
                    text: "the firewall drops incoming connections and does not open TCP port \(port)",
                    fix:
                        "`sudo nft add rule inet filter input tcp dport \(port) accept` (or your firewall's equivalent)"
                )
            )
        }
        if !rules.contains("5353") && !rules.contains("mdns") {
            findings.append(
                Finding(
                    verdict: .fail,
                    text: "the firewall drops incoming traffic and does not open mDNS (UDP 5353)",
                    fix: "`sudo nft add rule inet filter input udp dport 5353 accept`"
                )
            )
        }
        return findings.isEmpty ? [Finding(verdict: .ok, text: "the firewall opens port \(port) and mDNS")] : findings
    }

    static func checkPeers(_ peers: [PeerRecord]) -> [Finding] {
        var findings = [Finding]()
        for peer in peers {
            let name = peer.name ?? peer.address ?? peer.deviceID ?? "a peer"
            if let offset = peer.clockOffsetMilliseconds, offset.magnitude > 10_000 {
                findings.append(
                    Finding(
                        verdict: peer.state == .refused ? .fail : .warn,
                        text: "\(name)'s clock differs from ours by \(offset / 1000) s",
                        fix: "turn on time sync on both machines: `sudo timedatectl set-ntp true`"
                    )
                )
            }
            if peer.state == .refused, let error = peer.lastError {
                findings.append(
                    Finding(
                        verdict: .warn,
                        text: "\(name) was refused: \(error)",
                        fix: error.contains("handshake")
                            ? "if it should be in this group, join it with this group's code (`lansync group show --code`)"
                            : "see `lansync peers`"
                    )
                )
            }
        }
        if findings.isEmpty, !peers.isEmpty {
            findings.append(Finding(verdict: .ok, text: "\(peers.count) known peer(s); no clock or refusal problems"))
        }
        return findings
    }

    private static func run(_ command: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = command
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        guard (try? process.run()) != nil else { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return process.terminationStatus == 0 ? String(decoding: data, as: UTF8.self) : nil
    }
}
