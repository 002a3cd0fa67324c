import Foundation
import GRDB
import LANSyncCore
import LANSyncCrypto
import Testing

@testable import LANSyncStore

/// Newcomers catching up on more than one batch of one replica's changes (issue: a history of
/// more than 2,000 changes with an overwrite stalled every newcomer at the first batch). A batch
/// ends at a signed point; a change in it that lost to a change past that point is sent as a
/// stub whose loss the receiver cannot see yet. These sessions ask for ranges again as the agent
/// does, and must converge within a few batches, each within the 2,000 rows a sender may send.
@Suite struct LargeHistoryCatchUpTests {
    typealias Replica = AppTableConvergenceTests.Replica
    static let batchRows = 2_000

    /// A store that signs its chain with its own key, with `schema` applied.
    static func replica(_ number: UInt8, schema: String) throws -> (store: ReplicaStore, key: SigningKey) {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let store = try ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: number, count: 16))!)
            .signingHeads(with: key)
        _ = try store.applySchema(schema)
        return (store, key)
    }

    /// One session from `from` to `to`: batches for what `to` is believed to lack, the belief
    /// lowered to where `to` stands whenever it does not take a range. Returns the batches sent.
    static func session(_ from: ReplicaStore, to: ReplicaStore, keys: [ReplicaID: [UInt8]]) async throws -> Int {
        var known = try to.versionVector()
        var batches = 0
        while batches < 20 {
            let delta = try from.signedDelta(since: known, maxRows: batchRows)
            if delta.isEmpty { break }
            batches += 1
            #expect(
                delta.entries.count + delta.preferences.count + delta.preferenceStubs.count + delta.rows.count
                    <= batchRows
            )
            known.advance(by: delta.coverage)
            let result = try await to.mergeSigned(delta, keys: keys)
            for replica in result.rangesNotTaken { known[replica] = try to.versionVector()[replica] }
        }
        return batches
    }

    /// A device set a preference, wrote 3,000 entries and set it again: its first batch holds the
    /// first write as a stub, lost to a change two batches on.
    @Test func aPreferenceItsWriterSetAgainThousandsOfChangesLater() async throws {
        let a = try Replica(1)
        let b = try Replica(2)
        _ = try await a.store.setPreferences([PreferenceRequest(key: "ui/theme", value: "\"dark\"")], now: 900)
        _ = try await a.store.append((0..<3000).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 1_000)
        _ = try await a.store.setPreferences([PreferenceRequest(key: "ui/theme", value: "\"light\"")], now: 2_000)
        try await a.store.extendOwnChain()
        let batches = try await Self.session(a.store, to: b.store, keys: [a.store.replica: a.key.publicKey])
        #expect(batches == 2)
        #expect(try b.store.status().digest == a.store.status().digest)
        #expect(try b.store.openClaims().isEmpty)
    }

    /// The second flow: A's 3,000 entries and theme, overwritten by member C; newcomer B
    /// catches up from A (each replica's IDs are random: eight runs, eight orders).
    @Test(arguments: 0..<8) func aPreferenceAnotherMemberOverwroteAfterALargeHistory(_ run: Int) async throws {
        let a = try Replica(1)
        let c = try Replica(3)
        let b = try Replica(2)
        _ = try await a.store.append((0..<3000).map { AppendRequest(stream: "taps", payload: "\($0)") }, now: 1_000)
        _ = try await a.store.setPreferences([PreferenceRequest(key: "ui/theme", value: "\"dark\"")], now: 2_000)
        try await a.store.extendOwnChain()
        let keys = [a.store.replica: a.key.publicKey, c.store.replica: c.key.publicKey]
        _ = try await Self.session(a.store, to: c.store, keys: keys)
        _ = try await c.store.setPreferences([PreferenceRequest(key: "ui/theme", value: "\"light\"")], now: 3_000)
        try await c.store.extendOwnChain()
        _ = try await Self.session(c.store, to: a.store, keys: keys)
        #expect(try a.store.status().digest == c.store.status().digest)
        #expect(try await Self.session(a.store, to: b.store, keys: keys) <= 3)
        #expect(try b.store.status().digest == a.store.status().digest)
    }

    /// The third flow: a rowing session row, then 3,000 strokes in one transaction into
    /// an append-only table and the session's stroke count updated in it, while the phone was
    /// away: its first batch holds the session row's earlier count as a stub.
    @Test func oneLargeTransactionWhileAPeerWasAway() async throws {
        let schema = """
            CREATE TABLE sessions (id TEXT PRIMARY KEY, strokes INTEGER NOT NULL DEFAULT 0);
            -- lansync: append-only strokes
            CREATE TABLE strokes (id TEXT PRIMARY KEY, session TEXT NOT NULL, watts REAL);
            """
        let tablet = try Self.replica(1, schema: schema)
        let phone = try Self.replica(2, schema: schema)
        _ = try await tablet.store.write(now: 1_000) { db in
            for index in 0..<500 {
                try db.execute(sql: "INSERT INTO strokes VALUES (?, 's0', ?)", arguments: ["w\(index)", Double(index)])
            }
            try db.execute(sql: "INSERT INTO sessions VALUES ('s1', 0)")
        }
        try await tablet.store.extendOwnChain()
        let keys = [tablet.store.replica: tablet.key.publicKey]
        _ = try await Self.session(tablet.store, to: phone.store, keys: keys)
        _ = try await tablet.store.write(now: 2_000) { db in
            for index in 0..<3000 {
                try db.execute(sql: "INSERT INTO strokes VALUES (?, 's1', ?)", arguments: ["s\(index)", Double(index)])
            }
            try db.execute(sql: "UPDATE sessions SET strokes = 3000 WHERE id = 's1'")
        }
        _ = try await tablet.store.write(now: 3_000) { db in
            try db.execute(sql: "UPDATE sessions SET strokes = 3001 WHERE id = 's1'")
        }
        try await tablet.store.extendOwnChain()
        #expect(try await Self.session(tablet.store, to: phone.store, keys: keys) == 2)
        #expect(try phone.store.status().digest == tablet.store.status().digest)
        #expect(try phone.store.versionVector() == tablet.store.versionVector())
        let strokes = try phone.store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM strokes") }
        #expect(strokes == 3500)
    }
}
