import Foundation
import LANSync
import LANSyncCore
import LANSyncCrypto
import LANSyncWire
import Logging
import NIOCore
import NIOPosix
import Testing

@testable import LANSyncAgent
@testable import LANSyncTransport

/// One agent process serving two groups of a node behind one port (`GroupRouter`), and a member of
/// group A that speaks the protocol by hand and tries to get at group B: it names B's replica in
/// its state, asks for B's replica again, and sends changes in B's replica's name. It gets A's
/// data only, and nothing it sends reaches B's replica.
@Suite(.serialized) struct MultiGroupAgentTests {
    @Test func aMemberOfOneGroupGetsNothingOfTheOtherAndReachesNothingOfIt() async throws {
        let root = DataDirectory(path: NSTemporaryDirectory() + "lansync-groups-\(UUID().uuidString)")
        defer { RunningAgent.remove(root.path) }
        _ = try LANSyncNode.initialize(at: root, name: "room", machineIDPath: "/nonexistent")
        let nodeA = try LANSyncNode.open(at: root)
        let groupA = try nodeA.createGroup()
        let nodeB = try LANSyncNode.open(at: try NodeGroups.placeForNewGroup(named: "family-b", in: root).directory)
        _ = try nodeB.createGroup()
        _ = try await nodeA.append(to: "taps", payload: #"{"family":"a"}"#)
        _ = try await nodeB.append(to: "taps", payload: #"{"family":"b"}"#)
        #expect(nodeA.replicaID != nodeB.replicaID)

        var configuration = AgentConfiguration()
        configuration.listenHost = "127.0.0.1"
        configuration.listenPort = 0
        configuration.discovery = false
        configuration.keepalive = .seconds(60)
        configuration.handshakeTimeout = .seconds(60)
        // What an app that syncs several groups in its own process does.
        let agents = try Agent.serving([nodeA, nodeB], configuration: configuration, logger: Logger(label: "room"))
        let (agentA, agentB) = (agents[0], agents[1])
        let runs = [Task { try await agentA.run() }, Task { try await agentB.run() }]
        defer { for run in runs { run.cancel() } }
        let port = try await agentA.listeningPort()
        #expect(try await agentB.listeningPort() == port, "one port for both groups")

        let identity = RawPeer.Identity()
        let (hello, seen) = try await RawPeer.connect(
            port: port,
            group: groupA,
            identity: identity,
            expectState: false,
            closeAfter: .seconds(30)
        ) { peer in
            var seen: [WireMessage] = []
            // Ask for everything, naming B's replica as if it were a member of A's.
            let claims = VersionVector([nodeB.replicaID: 0, nodeA.replicaID: 0])
            try await peer.sender.send(.state(PeerState(versionVector: claims, digest: StateDigest(), hlc: .zero)))
            try await peer.sender.send(.resend(nodeB.replicaID, after: 0))
            // Changes in B's replica's name: no signature A's members could check.
            let forged = Entry(
                id: "forged-1",
                stream: "taps",
                originDevice: identity.device,
                dot: Dot(replica: nodeB.replicaID, counter: 5),
                hlc: HybridTimestamp(physicalMilliseconds: UInt64(Date().timeIntervalSince1970 * 1000), logical: 0),
                wallMilliseconds: Int64(Date().timeIntervalSince1970 * 1000),
                payload: #"{"forged":"b"}"#
            )
            try await peer.sender.send(
                encoded: WireMessage.delta(
                    Delta(entries: [forged], coverage: [.init(replica: nodeB.replicaID, from: 0, through: 5)])
                ).encoded()
            )
            // Until A's entry has come (and a moment of whatever follows), or the agent closes.
            while let message = try? await peer.next() {
                seen.append(message)
                if case .goodbye = message { break }
                if seen.contains(where: Self.carriesEntryOfA) { break }
            }
            return (peer.agentHello, seen)
        }
        #expect(hello?.replica == nodeA.replicaID, "the agent answers as group A's member")
        #expect(seen.contains(where: Self.carriesEntryOfA), "A's entry arrives: \(seen)")
        let bytesB = Self.bytes(nodeB.replicaID)
        for message in seen {
            // Asking the peer to send again the range it forged names the replica the peer named:
            // any unknown replica gets that answer, so it tells nothing of B.
            if case .resend(let replica, _) = message, replica == nodeB.replicaID { continue }
            let encoded = message.encoded()
            #expect(!encoded.contains(bytesB), "nothing sent names B's replica: \(message)")
            #expect(!String(decoding: encoded, as: UTF8.self).contains(#"{"family":"b"}"#))
        }
        // B's replica holds its own entry only, whatever A's member sent.
        let entriesB = try nodeB.entries()
        #expect(entriesB.map(\.payload) == [#"{"family":"b"}"#])
        #expect(
            Set(try nodeB.status().versionVector.counters.keys) == [nodeB.replicaID],
            "B's replica knows no replica but its own: not the member of A's, not A's"
        )
    }

    static func carriesEntryOfA(_ message: WireMessage) -> Bool {
        switch message {
        case .delta(let delta): delta.entries.contains { $0.payload == #"{"family":"a"}"# }
        case .push(let push): push.payload == #"{"family":"a"}"#
        default: false
        }
    }

    static func bytes(_ replica: ReplicaID) -> [UInt8] {
        withUnsafeBytes(of: replica.high.bigEndian, Array.init) + withUnsafeBytes(of: replica.low.bigEndian, Array.init)
    }
}

extension Array where Element == UInt8 {
    fileprivate func contains(_ needle: [UInt8]) -> Bool {
        guard needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { self[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
