-- The pendulum game's control tracking (../shared/seeds/000_…): control sessions and their
-- inputs arrive in batches and never change (append-only); preferences per control type and
-- motion calibrations change in real time, last writer wins per field; usage time is a REAL
-- counter (seconds, counted in millionths), so time added on two devices adds up. UUIDs are TEXT keys,
-- dates ms since the epoch, Bools INTEGER 0/1; input_data holds the control's JSON.

-- lansync: append-only control_sessions
CREATE TABLE control_sessions (
    session_id TEXT PRIMARY KEY,
    play_session_id TEXT,
    control_type TEXT NOT NULL CHECK (control_type IN ('push', 'slider', 'gyroscope', 'swipe', 'tilt', 'tap')),
    start_date INTEGER NOT NULL,
    end_date INTEGER,
    total_duration_s REAL NOT NULL,
    total_force_applications INTEGER NOT NULL,
    average_force_strength REAL NOT NULL,
    max_force_strength REAL NOT NULL,
    sensitivity REAL NOT NULL CHECK (sensitivity BETWEEN 0.1 AND 1.0),
    device_orientation TEXT NOT NULL,
    game_level INTEGER NOT NULL,
    game_mode TEXT NOT NULL
);

-- lansync: append-only control_inputs
CREATE TABLE control_inputs (
    input_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES control_sessions(session_id),
    timestamp INTEGER NOT NULL,
    control_type TEXT NOT NULL,
    input_data TEXT NOT NULL,
    force_applied REAL NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('left', 'right', 'up', 'down', 'none')),
    pendulum_angle REAL NOT NULL,
    pendulum_velocity REAL NOT NULL,
    response_time_ms REAL NOT NULL,
    effectiveness_score REAL
);
CREATE INDEX control_inputs_by_session ON control_inputs(session_id, timestamp);

-- One row per device and control type (a composite key: the same on every device).
CREATE TABLE control_preferences (
    device_id TEXT NOT NULL,
    control_type TEXT NOT NULL,
    user_id TEXT,
    sensitivity REAL NOT NULL DEFAULT 0.5,
    is_enabled INTEGER NOT NULL DEFAULT 1,
    custom_settings TEXT,
    last_used INTEGER,
    total_usage_time_s REAL NOT NULL DEFAULT 0,
    proficiency_level REAL NOT NULL DEFAULT 0,
    created_date INTEGER NOT NULL DEFAULT 0,
    updated_date INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (device_id, control_type)
);
-- lansync: counter control_preferences.total_usage_time_s

CREATE TABLE motion_calibrations (
    calibration_id TEXT PRIMARY KEY,
    device_id TEXT NOT NULL DEFAULT '',
    control_type TEXT NOT NULL DEFAULT 'gyroscope' CHECK (control_type IN ('gyroscope', 'tilt')),
    calibration_date INTEGER NOT NULL DEFAULT 0,
    baseline_x REAL NOT NULL DEFAULT 0,
    baseline_y REAL NOT NULL DEFAULT 0,
    baseline_z REAL NOT NULL DEFAULT 0,
    sensitivity_multiplier REAL NOT NULL DEFAULT 1,
    dead_zone REAL NOT NULL DEFAULT 0,
    max_range REAL NOT NULL DEFAULT 1,
    is_active INTEGER NOT NULL DEFAULT 1
);
