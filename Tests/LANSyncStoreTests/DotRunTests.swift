import Foundation
import GRDB
import LANSyncCore
import PropertyBased
import Testing

@testable import LANSyncStore

/// The dot index kept in runs (`DotRun`): new rows written together are indexed by one run, and
/// whatever supersedes some of them later, every reader (unsigned deltas cut at any row count,
/// signed ranges, a chain's leaves) still finds exactly the changes that win and the stubs of
/// those that do not.
@Suite struct DotRunTests {
    typealias Replica = AppTableConvergenceTests.Replica
    static let keys = (0..<24).map { "k\($0)" }

    static func count(_ store: ReplicaStore, _ sql: String) throws -> Int {
        try store.readInternals { try Int.fetchOne($0, sql: sql) } ?? 0
    }

    @Test func aBulkInsertIsIndexedByOneRunAndReadInSmallBatches() async throws {
        let (a, b) = (try Replica(1), try Replica(2))
        _ = try await a.store.write(now: 1_000) { db in
            for (index, key) in Self.keys.enumerated() {
                try db.execute(
                    sql: "INSERT INTO athletes (id, name, weight) VALUES (?, ?, ?)",
                    arguments: [key, "n\(index)", Double(index)]
                )
            }
        }
        #expect(try Self.count(a.store, "SELECT count(*) FROM app_op_runs") == 1)
        #expect(try Self.count(a.store, "SELECT count(*) FROM app_ops") == 0)
        #expect(try Self.count(a.store, "SELECT last - first + 1 FROM app_op_runs") == Self.keys.count)
        // Supersede some of them: a cell (the insert still wins, with a stub), a whole row's
        // cells, and a row deleted and inserted again.
        _ = try await a.store.write(now: 2_000) { db in
            try db.execute(sql: "UPDATE athletes SET name = 'renamed' WHERE id = 'k3'")
            try db.execute(sql: "UPDATE athletes SET name = 'x', weight = 1, notes = 'y' WHERE id = 'k7'")
            try db.execute(sql: "DELETE FROM athletes WHERE id = 'k11'")
            try db.execute(sql: "INSERT INTO athletes (id, notes) VALUES ('k11', 'back')")
        }
        // Unsigned deltas of two rows at a time, and signed ranges, reach the same state.
        try await AppTableConvergenceTests.ship(a, b, maxRows: 2, twice: false)
        #expect(try b.store.status().digest == a.store.status().digest)
        let c = try Replica(3)
        try await SignedRangeTests.ship(a.store, to: c.store, keys: [a.store.replica: a.key.publicKey])
        #expect(try c.store.status().digest == a.store.status().digest)
        #expect(try c.store.versionVector() == a.store.versionVector())
        // The receivers indexed what they took as runs too.
        #expect(try Self.count(c.store, "SELECT count(*) FROM app_op_runs WHERE last > first") >= 1)
        for replica in [a, b, c] { #expect(try replica.store.recomputeDigest() == replica.store.status().digest) }
    }

    /// A run keeps each key as what it shares with the one before it and the rest (`DotRun`):
    /// readers find every row, whether its key shares much, little or nothing, also once some
    /// are superseded, and a run stored before, with whole keys, still reads.
    @Test func runsKeepTheirKeysAsSharedBeginnings() async throws {
        let (a, b, c) = (try Replica(1), try Replica(2), try Replica(3))
        let shared = "a-beginning-shared-by-all-"
        let keys = ["q", shared + "mine", shared + "minf", "r", shared + "zzz", shared, "s"]
        _ = try await a.store.write(now: 2_000) { db in
            for (index, key) in keys.enumerated() {
                try db.execute(
                    sql: "INSERT INTO athletes (id, name, weight) VALUES (?, ?, ?)",
                    arguments: [key, "n\(index)", Double(index)]
                )
            }
        }
        let stored = try a.store.readInternals { db in
            try Data.fetchAll(db, sql: "SELECT keys FROM app_op_runs WHERE last > first").map { [UInt8]($0) }
        }
        #expect(stored.count == 1 && stored[0].first == DotRun.sharedForm, "one run, of shared beginnings")
        let whole = keys.map { SQLValue.keyBytes([.text($0)]) }
        #expect(stored[0].count < 1 + whole.reduce(0) { $0 + $1.count }, "shared beginnings are kept once")
        #expect(try stored[0].withUnsafeBytes { try DotRun.keys($0, count: keys.count, wanted: 0...6) } == whole)
        try await AppTableConvergenceTests.ship(a, b, maxRows: 2, twice: false)
        try await SignedRangeTests.ship(a.store, to: c.store, keys: [a.store.replica: a.key.publicKey])
        let rows = { (store: ReplicaStore) in
            try store.readInternals {
                try Row.fetchAll($0, sql: "SELECT id, name, weight FROM athletes ORDER BY id").map(\.description)
            }
        }
        for replica in [b, c] {
            #expect(try rows(replica.store) == rows(a.store))
            #expect(try replica.store.status().digest == a.store.status().digest)
        }
        // Superseded: a row whose key shares its beginning is deleted, another row is edited.
        _ = try await a.store.write(now: 3_000) { db in
            try db.execute(sql: "DELETE FROM athletes WHERE id = ?", arguments: [shared + "mine"])
            try db.execute(sql: "UPDATE athletes SET name = 'x', weight = 1, notes = 'y' WHERE id = 'r'")
        }
        let d = try Replica(4)
        try await AppTableConvergenceTests.ship(a, d, maxRows: 1, twice: false)
        try await AppTableConvergenceTests.ship(a, b, maxRows: 3, twice: false)
        let e = try Replica(5)
        try await SignedRangeTests.ship(a.store, to: e.store, keys: [a.store.replica: a.key.publicKey])
        for replica in [b, d, e] {
            #expect(try rows(replica.store) == rows(a.store))
            #expect(try replica.store.status().digest == a.store.status().digest)
            #expect(try replica.store.recomputeDigest() == replica.store.status().digest)
        }

        // The same run as schema 10 stored it: each whole key, as a varint length and its bytes.
        var wholeForm = [UInt8]()
        for key in whole {
            wholeForm.appendVarint(key.count)
            wholeForm += key
        }
        let wholeKeys = Data(wholeForm)
        try await a.store.writer.write { db in
            try db.execute(sql: "UPDATE app_op_runs SET keys = ? WHERE last > first", arguments: [wholeKeys])
        }
        let f = try Replica(6)
        try await AppTableConvergenceTests.ship(a, f, maxRows: 2, twice: false)
        #expect(try rows(f.store) == rows(a.store))
        #expect(try f.store.status().digest == a.store.status().digest)
    }

    /// Keys read back exactly from any point of a run, however much they share; keys that differ
    /// only at their end (a session's strokes) take a few bytes each, random ones about their
    /// length, and a run ends before its keys take more than `maxKeyBytes`.
    @Test func aRunKeepsKeysThatShareTheirBeginningInAFewBytes() async throws {
        func run(_ keys: [[UInt8]]) -> [DotRun] {
            var runs = [DotRun(table: 1, dot: 1, key: keys[0][...])]
            for (index, key) in keys.enumerated().dropFirst() {
                var current = runs[runs.count - 1]
                if current.extend(table: 1, dot: Int64(index + 1), key: key[...]) {
                    runs[runs.count - 1] = current
                } else {
                    runs.append(DotRun(table: 1, dot: Int64(index + 1), key: key[...]))
                }
            }
            return runs
        }
        func read(_ runs: [DotRun]) throws -> [[UInt8]] {
            try runs.flatMap { run in
                let count = Int(run.last - run.first + 1)
                let all = try run.keys.withUnsafeBytes { try DotRun.keys($0, count: count, wanted: 0...(count - 1)) }
                // Any one key alone, as a delta cut in the run's middle reads it.
                let middle = count / 2
                let one = try run.keys.withUnsafeBytes { try DotRun.keys($0, count: count, wanted: middle...middle) }
                #expect(one == [all[middle]])
                return all
            }
        }
        let session = "session-\(UUID().uuidString)"
        let strokes = (0..<500).map { SQLValue.keyBytes([.text(session), .integer(Int64($0))]) }
        let strokeRuns = run(strokes)
        #expect(try read(strokeRuns) == strokes)
        let strokeBytes = strokeRuns.reduce(0) { $0 + $1.keys.count }
        #expect(strokeBytes < 500 * 6, "\(strokeBytes) bytes for 500 strokes of \(strokes[0].count)-byte keys")
        let random = (0..<500).map { _ in SQLValue.keyBytes([.text(UUID().uuidString.lowercased())]) }
        let randomRuns = run(random)
        #expect(try read(randomRuns) == random)
        #expect(randomRuns.allSatisfy { $0.keys.count <= DotRun.maxKeyBytes } && randomRuns.count > 1)
        let mixed = (0..<300).map { index in index % 3 == 0 ? random[index] : strokes[index] }
        let mixedRuns = run(mixed)
        #expect(try read(mixedRuns) == mixed)

        // Damaged: cut short, it holds fewer keys than dots; changed at random, it throws saying
        // so or reads as some keys, and never traps.
        let (bytes, count) = (mixedRuns[0].keys, Int(mixedRuns[0].last - mixedRuns[0].first + 1))
        for length in 1..<bytes.count {
            #expect(throws: StoreError.self) {
                try Array(bytes.prefix(length)).withUnsafeBytes {
                    try DotRun.keys($0, count: count, wanted: 0...(count - 1))
                }
            }
        }
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int.max).array(of: 1...6)) { edits in
            var changed = bytes
            for edit in edits { changed[1 + edit % (changed.count - 1)] = UInt8(truncatingIfNeeded: edit >> 20) }
            do {
                _ = try changed.withUnsafeBytes { try DotRun.keys($0, count: count, wanted: 0...(count - 1)) }
            } catch let error as StoreError {
                #expect(error.description.contains("the database is damaged"))
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    /// A run of rowids (`DotRun.rowidForm`) reads back exactly from any point, whatever the
    /// rowids (in order, out of order, negative, SQLite's greatest); rows inserted one after
    /// another take a byte each, and a run of one form takes no dot of the other.
    @Test func aRunOfRowidsReadsBackFromAnyPoint() async throws {
        func run(_ rowids: [Int64]) -> [DotRun] {
            var runs = [DotRun(table: 1, dot: 1, rowid: rowids[0])]
            for (index, rowid) in rowids.enumerated().dropFirst() {
                var current = runs[runs.count - 1]
                if current.extend(table: 1, dot: Int64(index + 1), rowid: rowid) {
                    runs[runs.count - 1] = current
                } else {
                    runs.append(DotRun(table: 1, dot: Int64(index + 1), rowid: rowid))
                }
            }
            return runs
        }
        func read(_ runs: [DotRun]) throws -> [Int64] {
            try runs.flatMap { run in
                #expect(run.namesRowids && run.keys.count <= DotRun.maxKeyBytes)
                let count = Int(run.last - run.first + 1)
                let all = try run.keys.withUnsafeBytes { try DotRun.rowids($0, count: count, wanted: 0...(count - 1)) }
                let middle = count / 2
                let one = try run.keys.withUnsafeBytes { try DotRun.rowids($0, count: count, wanted: middle...middle) }
                #expect(one == [all[middle]])
                return all
            }
        }
        let inOrder = Array(Int64(1_000)..<3_000)
        let inOrderRuns = run(inOrder)
        #expect(try read(inOrderRuns) == inOrder)
        let bytes = inOrderRuns.reduce(0) { $0 + $1.keys.count }
        #expect(inOrderRuns.count == 1 && bytes < 2_000 + 8, "\(bytes) bytes for 2,000 rows in order")
        let extremes: [Int64] = [.max, .min, 0, -1, .max, 1, .min + 1, .max - 1]
        #expect(try read(run(extremes)) == extremes)
        await propertyCheck(count: 200, input: Gen.int64(in: Int64.min...Int64.max).array(of: 1...300)) { rowids in
            #expect((try? read(run(rowids))) == rowids)
        }
        // The forms do not mix, and each reader refuses the other's.
        var keyed = DotRun(table: 1, dot: 1, key: SQLValue.keyBytes([.integer(1)])[...])
        let keyedTookRowid = keyed.extend(table: 1, dot: 2, rowid: 2)
        var byRowid = DotRun(table: 1, dot: 1, rowid: 1)
        let tookKey = byRowid.extend(table: 1, dot: 2, key: SQLValue.keyBytes([.integer(2)])[...])
        let tookOtherTable = byRowid.extend(table: 2, dot: 2, rowid: 2)
        let tookGap = byRowid.extend(table: 1, dot: 3, rowid: 2)
        #expect(!keyedTookRowid && !tookKey && !tookOtherTable && !tookGap)
        #expect(throws: StoreError.self) {
            try byRowid.keys.withUnsafeBytes { try DotRun.keys($0, count: 1, wanted: 0...0) }
        }
        #expect(throws: StoreError.self) {
            try keyed.keys.withUnsafeBytes { try DotRun.rowids($0, count: 1, wanted: 0...0) }
        }
        // Damaged: cut short, or holding more rows than dots.
        let whole = run(Array(Int64(1)..<40).map { $0 * 1_000 })[0].keys
        for length in 1..<whole.count {
            #expect(throws: StoreError.self) {
                try Array(whole.prefix(length)).withUnsafeBytes { try DotRun.rowids($0, count: 39, wanted: 0...38) }
            }
        }
        #expect(throws: StoreError.self) {
            try whole.withUnsafeBytes { try DotRun.rowids($0, count: 38, wanted: 0...37) }
        }
        // Changed at random: it throws saying so or reads as some rowids, and never traps.
        await propertyCheck(count: 300, input: Gen.int(in: 0...Int.max).array(of: 1...6)) { edits in
            var changed = whole
            for edit in edits { changed[1 + edit % (changed.count - 1)] = UInt8(truncatingIfNeeded: edit >> 20) }
            do {
                _ = try changed.withUnsafeBytes { try DotRun.rowids($0, count: 39, wanted: 0...38) }
            } catch let error as StoreError {
                #expect(error.description.contains("the database is damaged"))
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    /// A receiving store that checks a batch itself (as a session does, beside the merge before)
    /// encodes new rows' states with the numbers of columns and replicas it holds, and they
    /// are stored exactly as the writer would have encoded them.
    @Test func statesEncodedByTheCheckAreTheWritersOwn() async throws {
        let a = try Replica(1)
        let checkedHere = try Replica(2)
        var encodedAhead = [Bool]()
        for round in 0..<2 {
            _ = try await a.store.write(now: 1_000 + UInt64(round)) { db in
                for index in 0..<20 {
                    try db.execute(
                        sql: "INSERT INTO athletes (id, name, weight, xp) VALUES (?, ?, ?, ?)",
                        arguments: ["r\(round)-\(index)", "n", Double(index), index]
                    )
                }
            }
            try await a.store.extendOwnChain()
            let delta = try SignedRangeTests.everything(a.store, beyond: try checkedHere.store.versionVector())
            let checked = try checkedHere.store.check(delta, signed: true)
            encodedAhead.append(checked.firstRows.allSatisfy { $0.stored != nil })
            _ = try await checkedHere.store.mergeSigned(checked, keys: [a.store.replica: a.key.publicKey])
        }
        let checkedAlone = try Replica(3)
        // The first batch finds no numbers yet; the second finds every one it needs.
        #expect(encodedAhead == [false, true])
        try await SignedRangeTests.ship(a.store, to: checkedAlone.store, keys: [a.store.replica: a.key.publicKey])
        let states = { (store: ReplicaStore) in
            try store.readInternals {
                try Row.fetchAll($0, sql: "SELECT key, state FROM app_rows ORDER BY key").map {
                    [$0[0] as Data, $0[1] as Data]
                }
            }
        }
        #expect(try states(checkedHere.store) == states(checkedAlone.store))
        #expect(try checkedHere.store.status().digest == a.store.status().digest)
    }

    /// A change that comes with the state the check made of it as a new row, while its row is
    /// held (an edit of a row taken before, a second change of a row new in the same delta),
    /// merges the general way, and the replica ends where the sender is.
    @Test func checkedStatesOfHeldRowsMergeTheGeneralWay() async throws {
        let (a, b) = (try Replica(1), try Replica(2))
        let keys = [a.store.replica: a.key.publicKey]
        func take() async throws -> [Bool] {
            try await a.store.extendOwnChain()
            let checked = try b.store.check(
                try SignedRangeTests.everything(a.store, beyond: try b.store.versionVector()),
                signed: true
            )
            _ = try await b.store.mergeSigned(checked, keys: keys)
            return checked.firstRows.map { $0.stored != nil }
        }
        _ = try await a.store.write(now: 1_000) { db in
            // Every column named (an insert leaves a column at its default out): the receiver
            // then has a number for each column the later changes write.
            for index in 0..<20 {
                try db.execute(
                    sql: "INSERT INTO athletes (id, name, weight, notes) VALUES (?, 'n', ?, 'first')",
                    arguments: ["old\(index)", Double(index)]
                )
            }
        }
        _ = try await take()
        // Edits of held rows among new rows, and new rows edited again, in one delta.
        _ = try await a.store.write(now: 2_000) { db in
            for index in 0..<10 {
                try db.execute(
                    sql: "INSERT INTO athletes (id, name, weight) VALUES (?, 'new', ?)",
                    arguments: ["new\(index)", Double(index)]
                )
                try db.execute(
                    sql: "UPDATE athletes SET name = ? WHERE id = ?",
                    arguments: ["edited\(index)", "old\(index)"]
                )
            }
            try db.execute(sql: "DELETE FROM athletes WHERE id = 'old15'")
        }
        _ = try await a.store.write(now: 3_000) { db in
            for index in 0..<10 where index % 2 == 0 {
                try db.execute(sql: "UPDATE athletes SET weight = 100 WHERE id = ?", arguments: ["new\(index)"])
            }
            try db.execute(sql: "INSERT INTO athletes (id, notes) VALUES ('old15', 'back')")
        }
        let encodedAhead = try await take()
        #expect(
            encodedAhead.count > 20 && encodedAhead.allSatisfy { $0 },
            "every change came with a state made by the check"
        )
        #expect(try b.store.status().digest == a.store.status().digest)
        #expect(try b.store.recomputeDigest() == b.store.status().digest)
        let rows = { (store: ReplicaStore) in
            try store.readInternals {
                try Row.fetchAll($0, sql: "SELECT id, name, weight, notes FROM athletes ORDER BY id").map(\.description)
            }
        }
        #expect(try rows(b.store) == rows(a.store))
        #expect(try rows(b.store).contains { $0.contains("edited3") })
    }

    /// A peer that sends two rows under one dot is refused, whether the dot is in a run stored
    /// earlier, in the run under way, or in `app_ops`.
    @Test func aDotReusedForAnotherRowIsRefused() async throws {
        let a = try Replica(1)
        _ = try await a.store.write(now: 1_000) { db in
            for key in ["k0", "k1", "k2"] {
                try db.execute(sql: "INSERT INTO athletes (id, name) VALUES (?, 'n')", arguments: [key])
            }
        }
        let b = try Replica(2)
        _ = try await b.store.merge(try a.store.delta(since: VersionVector(), maxRows: 10))
        let sent = try a.store.delta(since: VersionVector(), maxRows: 10).rows
        func delta(_ changes: [RowChange]) -> Delta {
            let counter = changes[0].dot.counter
            return Delta(
                rows: changes,
                coverage: [.init(replica: a.store.replica, from: counter - 1, through: counter)]
            )
        }
        func forged(_ change: RowChange, key: String) -> RowChange {
            RowChange(
                key: RowKey(table: "athletes", primaryKey: [.text(key)]),
                kind: change.kind,
                causalLength: change.causalLength,
                hlc: change.hlc,
                dot: change.dot,
                values: change.values,
                totals: change.totals
            )
        }
        func expectRefused(_ merge: () async throws -> Void) async {
            do {
                try await merge()
                Issue.record("a delta that reuses a dot was merged")
            } catch let error as StoreError {
                #expect(error.message.contains("is already held with different contents"), "\(error.message)")
            } catch {
                Issue.record("\(error)")
            }
        }
        // Dot 2 again, for a row b has not heard of: its run is stored already.
        await expectRefused { _ = try await b.store.merge(delta([forged(sent[1], key: "other")])) }
        // Two new rows under one dot in one delta: the second run meets the first.
        let fresh = try Replica(4)
        await expectRefused {
            _ = try await fresh.store.merge(delta([forged(sent[0], key: "x"), forged(sent[0], key: "y")]))
        }
        // A dot of a run, used by an update of a held row: `app_ops` meets the run.
        var update = forged(sent[2], key: "k0")
        update = RowChange(
            key: update.key,
            kind: .update,
            causalLength: 1,
            hlc: HybridTimestamp(rawValue: update.hlc.rawValue + 1),
            dot: update.dot,
            values: [.init(column: "name", value: .text("other"))],
            totals: []
        )
        await expectRefused { _ = try await b.store.merge(delta([update])) }
        #expect(try b.store.status().digest == a.store.status().digest)
    }

    /// Random bulk inserts, edits, deletes and re-inserts on three replicas that sync in signed
    /// ranges at random moments: all converge, and a newcomer taking everything from one of them,
    /// as signed ranges or as unsigned deltas of a few rows each, holds the same.
    @Test func runsKeepEveryReaderExact() async {
        await propertyCheck(count: 30, input: Gen.int(in: 0...1_000_000).array(of: 4...40)) { steps in
            do {
                let replicas = try (1...3).map { try Replica($0) }
                let keys = Dictionary(uniqueKeysWithValues: replicas.map { ($0.store.replica, $0.key.publicKey) })
                var now: UInt64 = 1_000
                for step in steps {
                    now += 10
                    let replica = replicas[step % 3]
                    let first = (step / 3) % Self.keys.count
                    let count = 1 + (step / 97) % 9
                    let chosen = (0..<count).map { Self.keys[(first + $0 * 5) % Self.keys.count] }
                    switch (step / 7) % 5 {
                    case 0, 1:
                        _ = try await replica.store.write(now: now) { db in
                            for key in chosen {
                                try db.execute(
                                    sql: "INSERT OR IGNORE INTO athletes (id, name, weight) VALUES (?, ?, ?)",
                                    arguments: [key, "n\(step % 13)", Double(step % 50)]
                                )
                            }
                        }
                    case 2:
                        let column = ["name", "weight", "notes"][(step / 11) % 3]
                        _ = try await replica.store.write(now: now) { db in
                            for key in chosen.prefix(3) {
                                let value =
                                    column == "name"
                                    ? "n\(step % 13)".databaseValue : AppTableConvergenceTests.value(step)
                                try db.execute(
                                    sql: "UPDATE athletes SET \(column) = ? WHERE id = ?",
                                    arguments: [value, key]
                                )
                            }
                        }
                    case 3:
                        _ = try await replica.store.write(now: now) { db in
                            for key in chosen.prefix(2) {
                                try db.execute(sql: "DELETE FROM athletes WHERE id = ?", arguments: [key])
                            }
                        }
                    default:
                        let other = replicas[(step / 5) % 3]
                        guard other !== replica else { continue }
                        try await SignedRangeTests.ship(replica.store, to: other.store, keys: keys)
                    }
                }
                for _ in 0..<2 {
                    for from in replicas {
                        for to in replicas where to !== from {
                            try await SignedRangeTests.ship(from.store, to: to.store, keys: keys)
                        }
                    }
                }
                let digest = try replicas[0].store.status().digest
                for replica in replicas {
                    #expect(try replica.store.status().digest == digest)
                    #expect(try replica.store.recomputeDigest() == digest)
                }
                let unsigned = try Replica(4)
                try await AppTableConvergenceTests.ship(
                    replicas[1],
                    unsigned,
                    maxRows: 1 + steps.count % 4,
                    twice: false
                )
                #expect(try unsigned.store.status().digest == digest)
                let signed = try Replica(5)
                try await SignedRangeTests.ship(replicas[2].store, to: signed.store, keys: keys)
                #expect(try signed.store.status().digest == digest)
                #expect(try signed.store.versionVector() == replicas[0].store.versionVector())
                // Checked by the receiving store, as a session does: new rows' states come encoded
                // with the numbers it held when it checked.
                let prepared = try Replica(6)
                for _ in 0..<3 {
                    let delta = try SignedRangeTests.everything(
                        replicas[2].store,
                        beyond: try prepared.store.versionVector()
                    )
                    if delta.isEmpty { break }
                    _ = try await prepared.store.mergeSigned(try prepared.store.check(delta, signed: true), keys: keys)
                }
                #expect(try prepared.store.status().digest == digest)
                #expect(try prepared.store.recomputeDigest() == digest)
                var (held, merged) = ([RowKey: RowState](), [RowKey: RowState]())
                try replicas[2].store.forEachAppRow { held[$0] = $1 }
                try prepared.store.forEachAppRow { merged[$0] = $1 }
                #expect(merged == held)
            } catch {
                Issue.record("\(error)")
            }
        }
    }
}
