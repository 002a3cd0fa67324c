import Testing

@testable import LANSyncAgent

@Suite struct ConfigFileTests {
    @Test func everyKeyIsReadAndApplied() throws {
        let text = """
            # the therapy room's machine
            data-dir = /var/lib/lansync
            listen = [::]:7800
              peer = 192.168.1.20:7741
            peer = laptop.local
            log-level = debug
            max-clock-skew = 30
            max-connections = 16
            mdns = off
            mdns-name = LANSync therapy room
            api = 127.0.0.1:7800

            """
        let file = try ConfigFile.parse(text, path: "lansync.conf")
        #expect(file.api == PeerAddress(host: "127.0.0.1", port: 7800) && !file.apiOff)
        #expect(try ConfigFile.parse("api = off", path: "c").apiOff)
        #expect(file.dataDir == "/var/lib/lansync")
        #expect(
            file.peers == [
                PeerAddress(host: "192.168.1.20", port: 7741), PeerAddress(host: "laptop.local", port: 7741),
            ]
        )
        #expect(file.logLevel == "debug")
        var configuration = AgentConfiguration()
        file.apply(to: &configuration)
        #expect(configuration.listenHost == "::" && configuration.listenPort == 7800)
        #expect(configuration.staticPeers.count == 2)
        #expect(configuration.maxClockSkewMilliseconds == 30_000)
        #expect(configuration.maxConnections == 16)
        #expect(configuration.discovery == false)
        #expect(configuration.mdnsName == "LANSync therapy room")
    }

    @Test func anEmptyFileChangesNothing() throws {
        let file = try ConfigFile.parse("# nothing here\n\n", path: "c")
        var configuration = AgentConfiguration()
        file.apply(to: &configuration)
        #expect(configuration.listenPort == AgentConfiguration.defaultPort)
        #expect(configuration.discovery)
    }

    @Test func badLinesAreRefusedWithTheLineAndTheReason() {
        let cases: [(String, Int, String)] = [
            ("colour = blue", 1, "unknown key 'colour'"),
            ("# ok\nlisten = nowhere:port", 2, "listen: 'nowhere:port' is not HOST:PORT"),
            ("peer = :7741", 1, "is not HOST:PORT"),
            ("peer = host:99999", 1, "is not HOST:PORT"),
            ("log-level = loud", 1, "log-level: 'loud' is not one of"),
            ("max-clock-skew = 0", 1, "max-clock-skew"),
            ("max-clock-skew = ten", 1, "max-clock-skew"),
            ("max-connections = 100000", 1, "max-connections"),
            ("mdns = maybe", 1, "mdns: 'maybe' is not on or off"),
            ("data-dir = relative/path", 1, "absolute path"),
            ("listen", 1, "expected `key = value`"),
            ("log-level =", 1, "has no value"),
            ("mdns = on\nmdns = off", 2, "'mdns' is set twice"),
            ("mdns-name = " + String(repeating: "x", count: 64), 1, "63 bytes"),
            ("api = 0.0.0.0:7742", 1, "api: '0.0.0.0:7742' is not a loopback HOST:PORT"),
            ("api = loud", 1, "is not a loopback HOST:PORT"),
        ]
        for (text, line, reason) in cases {
            do {
                _ = try ConfigFile.parse(text, path: "/etc/lansync/lansync.conf")
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.line == line, "\(text)")
                #expect(error.description.hasPrefix("/etc/lansync/lansync.conf:\(line): "), "\(error)")
                #expect(error.reason.contains(reason), "\(text): \(error.reason)")
            }
        }
    }
}
