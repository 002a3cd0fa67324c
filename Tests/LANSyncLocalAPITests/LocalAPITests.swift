import Foundation
import Hummingbird
import LANSync
import LANSyncAgent
import LANSyncCore
import LANSyncTestSupport
import Logging
import PropertyBased
import Testing

@testable import LANSyncLocalAPI

/// The local API's parts that need no running server: the token file, the feed's cursor, the
/// guard's address rules, and the OpenAPI document against the router (the server itself is
/// exercised over HTTP by the CLI tests, from Python).
@Suite struct LocalAPITests {
    static func temporaryDirectory() -> DataDirectory {
        let path = NSTemporaryDirectory() + "lansync-api-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return DataDirectory(path: path)
    }

    // MARK: Token

    @Test func theTokenIsMadeOnceOwnerOnlyAndComparedWhole() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let token = try APIToken.loadOrCreate(in: directory)
        #expect(token.value.count == 64 && token.value.allSatisfy(\.isHexDigit))
        let path = directory.path + "/" + APIToken.fileName
        let mode = try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)
        #expect(mode.intValue == 0o600)
        #expect(try APIToken.loadOrCreate(in: directory).value == token.value)
        #expect(token.matches(token.value))
        #expect(!token.matches(String(token.value.dropLast())))
        #expect(!token.matches(token.value + "0"))
        #expect(!token.matches(""))
        // A copy made readable by others is narrowed back to the owner.
        chmod(path, 0o644)
        _ = try APIToken.loadOrCreate(in: directory)
        let narrowed = try #require(FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)
        #expect(narrowed.intValue == 0o600)
    }

    @Test func aDamagedTokenFileIsRefusedWithWhatToDo() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        try "short\n".write(toFile: directory.path + "/" + APIToken.fileName, atomically: true, encoding: .utf8)
        #expect { try APIToken.loadOrCreate(in: directory) } throws: { error in
            (error as? LANSyncError)?.message.contains("delete it") == true
        }
    }

    // MARK: Cursor

    @Test func cursorsRoundTripAndHaveOneSpelling() async {
        // Each seed makes one replica ID and one counter anywhere in the protocol's range.
        await propertyCheck(input: Gen.int(in: 0...Int.max).array(of: 0...20)) { seeds in
            var random = SplitMix64(seed: UInt64(seeds.count))
            let pairs = seeds.map { seed -> (ReplicaID, UInt64) in
                let bytes = (0..<16).map {
                    UInt8(truncatingIfNeeded: UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 >> UInt64($0 * 4))
                }
                return (ReplicaID(bytes: bytes)!, 1 + random.next() % Dot.maxCounter)
            }
            let vector = VersionVector(Dictionary(pairs, uniquingKeysWith: max))
            let cursor = FeedCursor(vector)
            let read = FeedCursor(text: cursor.text)
            #expect(read == cursor)
            #expect(read?.text == cursor.text)
        }
    }

    /// Whatever a client sends as a cursor, reading it never traps, and a cursor it accepts is
    /// one this API could have written (one spelling per cursor). The inputs are real cursors
    /// with one character changed, inserted or cut, so many of them still decode.
    @Test func anyTextIsReadSafelyAsACursor() async {
        let alphabet = Array("AZaz09-_+/=!é.")
        let real = FeedCursor(
            VersionVector([
                ReplicaID(bytes: Array(0..<16))!: 5,
                ReplicaID(bytes: Array(repeating: 0xEE, count: 16))!: Dot.maxCounter,
            ])
        ).text
        let characters = Array(real)
        await propertyCheck(
            input: Gen.int(in: 0..<characters.count),
            Gen.int(in: 0..<alphabet.count),
            Gen.int(in: 0...2)
        ) {
            position,
            replacement,
            edit in
            var text = characters
            switch edit {
            case 0: text[position] = alphabet[replacement]
            case 1: text.insert(alphabet[replacement], at: position)
            default: text.remove(at: position)
            }
            if let cursor = FeedCursor(text: String(text)) { #expect(cursor.text == String(text)) }
        }
    }

    @Test func malformedCursorsAreRefused() {
        let one = FeedCursor(VersionVector([ReplicaID(bytes: Array(repeating: 7, count: 16))!: 5])).text
        for text in [
            "", "v1", "v2." + one.dropFirst(3), "v1.!!!!", String(one.dropLast(2)), one + "AAAA", one + "=",
            one.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
                + (one.contains("-") || one.contains("_") ? "" : "+"),
            // A counter of 0 and one past the protocol's range.
            FeedCursor.encodeForTest([(Array(repeating: 7, count: 16), 0)]),
            FeedCursor.encodeForTest([(Array(repeating: 7, count: 16), Dot.maxCounter + 1)]),
            // Replicas out of order, and twice.
            FeedCursor.encodeForTest([(Array(repeating: 9, count: 16), 1), (Array(repeating: 7, count: 16), 1)]),
            FeedCursor.encodeForTest([(Array(repeating: 7, count: 16), 1), (Array(repeating: 7, count: 16), 2)]),
        ] {
            #expect(FeedCursor(text: text) == nil, "\(text)")
        }
        #expect(FeedCursor(text: "v1.") == FeedCursor())
    }

    // MARK: Guard

    @Test func onlyLoopbackHostsAndOriginsPass() {
        for host in ["localhost", "LOCALHOST:7742", "127.0.0.1", "127.0.0.1:7742", "[::1]", "[::1]:80"] {
            #expect(LoopbackGuard<BasicRequestContext>.isLoopback(host: host), "\(host)")
        }
        for host in [
            "evil.com", "localhost.evil.com", "127.0.0.1.nip.io", "127.0.0.2", "[::2]", "[::1]x", "localhost:80x", "",
            "192.168.1.20:7742",
        ] {
            #expect(!LoopbackGuard<BasicRequestContext>.isLoopback(host: host), "\(host)")
        }
        #expect(LoopbackGuard<BasicRequestContext>.isLoopback(origin: "http://127.0.0.1:7742"))
        #expect(!LoopbackGuard<BasicRequestContext>.isLoopback(origin: "http://evil.com"))
        #expect(!LoopbackGuard<BasicRequestContext>.isLoopback(origin: "null"))
        #expect(!LoopbackGuard<BasicRequestContext>.isLoopback(origin: "file://"))
    }

    // MARK: OpenAPI

    static var openAPIPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("docs/openapi.json").path
    }

    @Test func theOpenAPIDocumentListsExactlyTheServersAPIRoutes() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        _ = try LANSyncNode.initialize(at: directory, name: "api", machineIDPath: "/nonexistent")
        let node = try LANSyncNode.open(at: directory)
        _ = try node.createGroup()
        var configuration = AgentConfiguration()
        configuration.discovery = false
        let agent = try Agent(node: node, configuration: configuration, logger: Logger(label: "test"))
        let router = LocalAPI.router(
            agent: agent,
            node: node,
            token: APIToken(value: String(repeating: "a", count: 64))
        )
        // The API's routes; the dashboard's pages (/dashboard/…, /login) are HTML for people.
        let served = Set(
            router.routes.map { route in
                // Hummingbird writes "/v1/streams/:stream/entries"; OpenAPI "/v1/streams/{stream}/entries".
                // A preference's key is the rest of the path ("**"), as it may hold slashes.
                "\(route.method) "
                    + route.path.description.split(separator: "/", omittingEmptySubsequences: false).map { part in
                        part == "**" ? "{key}" : part.hasPrefix(":") ? "{\(part.dropFirst())}" : String(part)
                    }.joined(separator: "/")
            }.filter { $0.contains(" /v1/") }
        )
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: Self.openAPIPath)))
                as? [String: Any]
        )
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        let documented = Set(
            paths.flatMap { path, operations in
                operations.keys.filter { ["get", "put", "post", "delete", "patch"].contains($0) }.map {
                    "\($0.uppercased()) \(path)"
                }
            }
        )
        #expect(!served.isEmpty)
        #expect(
            served == documented,
            "served but not documented: \(served.subtracting(documented).sorted()); documented but not served: \(documented.subtracting(served).sorted())"
        )
    }

    @Test func theOpenAPIDocumentIsValidOpenAPI() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c",
            "import json, sys; from openapi_spec_validator import validate; validate(json.load(open(sys.argv[1]))); print('valid')",
            Self.openAPIPath,
        ]
        let (status, text, _) = try await process.runCapturingOutput(mergingErrors: true)
        #expect(status == 0, "openapi-spec-validator (installed by scripts/setup): \(text)")
        #expect(text.contains("valid"))
    }
}

extension FeedCursor {
    /// Bytes as a cursor would spell them, without the checks: for testing what `init(text:)` refuses.
    static func encodeForTest(_ pairs: [([UInt8], UInt64)]) -> String {
        var bytes = [UInt8]()
        for (replica, counter) in pairs {
            bytes += replica
            for shift in stride(from: 56, through: 0, by: -8) {
                bytes.append(UInt8(truncatingIfNeeded: counter >> UInt64(shift)))
            }
        }
        return "v1."
            + Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(
                of: "/",
                with: "_"
            )
            .replacingOccurrences(of: "=", with: "")
    }
}
