//! The TensorBoard messages this writer emits, as prost structs: the
//! subset of TensorFlow's `Event`, `Summary`, `HistogramProto`,
//! `SessionLog` and `TensorProto` (`tensorflow/core/util/event.proto`,
//! `tensorflow/core/framework/summary.proto`, `tensor.proto`) that scalars,
//! histograms, text and a restart marker need. Field numbers are those of
//! the TensorFlow protos, which is what makes TensorBoard's reader (and
//! `wandb sync`) read them; fields left out are ones a reader treats as
//! absent.
//!
//! Why derive rather than compile `.proto` files: six small messages, no
//! build step, and prost (already in the tree through tonic) does the
//! encoding.

/// One record of an event file.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    /// The x axis: env steps.
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(oneof = "What", tags = "3, 5, 7")]
    pub what: Option<What>,
}

/// What an [`Event`] carries.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum What {
    /// The first record of a file: `brain.Event:2`.
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
    #[prost(message, tag = "7")]
    SessionLog(SessionLog),
}

/// Values logged at one step.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// One tagged value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryValue {
    #[prost(string, tag = "1")]
    pub tag: String,
    /// Which plugin shows it (`text` for text; none for scalars and
    /// histograms in their classic form).
    #[prost(message, optional, tag = "9")]
    pub metadata: Option<SummaryMetadata>,
    #[prost(oneof = "Value", tags = "2, 5, 8")]
    pub value: Option<Value>,
}

/// The value of a [`SummaryValue`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Value {
    #[prost(float, tag = "2")]
    SimpleValue(f32),
    #[prost(message, tag = "5")]
    Histo(HistogramProto),
    #[prost(message, tag = "8")]
    Tensor(TensorProto),
}

/// A histogram: bucket `i` counts values in `(bucket_limit[i - 1],
/// bucket_limit[i]]`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct HistogramProto {
    #[prost(double, tag = "1")]
    pub min: f64,
    #[prost(double, tag = "2")]
    pub max: f64,
    #[prost(double, tag = "3")]
    pub num: f64,
    #[prost(double, tag = "4")]
    pub sum: f64,
    #[prost(double, tag = "5")]
    pub sum_squares: f64,
    #[prost(double, repeated, tag = "6")]
    pub bucket_limit: Vec<f64>,
    #[prost(double, repeated, tag = "7")]
    pub bucket: Vec<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SummaryMetadata {
    #[prost(message, optional, tag = "1")]
    pub plugin_data: Option<PluginData>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginData {
    #[prost(string, tag = "1")]
    pub plugin_name: String,
}

/// A tensor; here only a scalar string (text summaries).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorProto {
    /// `DT_STRING`.
    #[prost(int32, tag = "1")]
    pub dtype: i32,
    /// Present and empty: a scalar.
    #[prost(message, optional, tag = "2")]
    pub tensor_shape: Option<TensorShapeProto>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub string_val: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TensorShapeProto {}

/// TensorFlow's `DT_STRING`.
pub const DT_STRING: i32 = 7;

/// A session marker. `START` at a step tells TensorBoard's reader that
/// whatever an earlier writer logged after that step is orphaned (a
/// resumed run continues from its checkpoint, behind the point the run
/// before it had reached), so the curves join into one.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SessionLog {
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// `SessionLog.START`.
pub const SESSION_START: i32 = 1;
