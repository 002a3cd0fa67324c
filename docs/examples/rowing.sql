-- The rowing performance tracker (../shared/seeds/004_…): athletes, sessions edited while they
-- run, and per-stroke metrics appended at a high rate. SwiftData's UUID ids become TEXT keys;
-- dates are ms since the epoch (INTEGER); enums are TEXT.

CREATE TABLE athletes (
    id TEXT PRIMARY KEY,               -- a UUID
    name TEXT NOT NULL DEFAULT '',
    email TEXT,
    team_id TEXT,
    profile_image BLOB,
    preferred_boat TEXT,
    weight_kg REAL,
    height_cm REAL,
    user_role TEXT NOT NULL DEFAULT 'athlete' CHECK (user_role IN ('athlete', 'coach', 'admin')),
    created_at INTEGER NOT NULL DEFAULT 0,
    modified_at INTEGER NOT NULL DEFAULT 0,
    is_active INTEGER NOT NULL DEFAULT 1
);

-- Edited while it runs: one device updates end_time and the totals every second while
-- another adds notes; each column merges on its own.
CREATE TABLE rowing_sessions (
    id TEXT PRIMARY KEY,
    athlete_id TEXT REFERENCES athletes(id) ON DELETE CASCADE,
    team_id TEXT,
    pm5_device_id TEXT NOT NULL DEFAULT '',
    session_type TEXT NOT NULL DEFAULT 'freeRow',
    start_time INTEGER NOT NULL DEFAULT 0,
    end_time INTEGER,
    total_distance_m REAL NOT NULL DEFAULT 0,
    total_time_s REAL NOT NULL DEFAULT 0,
    average_pace_s REAL NOT NULL DEFAULT 0,
    average_stroke_rate REAL NOT NULL DEFAULT 0,
    average_power_w REAL NOT NULL DEFAULT 0,
    max_power_w REAL NOT NULL DEFAULT 0,
    drag_factor REAL NOT NULL DEFAULT 0,
    is_complete INTEGER NOT NULL DEFAULT 0,
    notes TEXT,
    created_at INTEGER NOT NULL DEFAULT 0,
    modified_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX rowing_sessions_by_athlete ON rowing_sessions(athlete_id, start_time);

-- One row per stroke, never changed: a grow-only set; a deleted session takes its strokes along.
-- lansync: append-only performance_metrics
CREATE TABLE performance_metrics (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES rowing_sessions(id) ON DELETE CASCADE,
    timestamp INTEGER NOT NULL,
    distance_m REAL NOT NULL,
    pace_s REAL NOT NULL,
    stroke_rate INTEGER NOT NULL,
    power_w REAL NOT NULL,
    stroke_count INTEGER NOT NULL,
    heart_rate INTEGER,
    stroke_phase TEXT NOT NULL,
    drive_time_s REAL NOT NULL,
    recovery_time_s REAL NOT NULL,
    stroke_length_m REAL NOT NULL,
    peak_force REAL NOT NULL,
    average_force REAL NOT NULL,
    work_per_stroke_j REAL NOT NULL
);
CREATE INDEX performance_metrics_by_session ON performance_metrics(session_id, timestamp);
