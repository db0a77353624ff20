//! [`Point`]: one value for TensorBoard as the run monitor hands it over
//! (a scalar, a histogram of raw values or of a [`HistogramSnapshot`]'s
//! buckets, a text, a restart marker), and its [`Event`].
use super::event::{
    Event, HistogramProto, PluginData, SessionLog, Summary, SummaryMetadata, SummaryValue,
    TensorProto, TensorShapeProto, Value, What, DT_STRING, SESSION_START,
};
use crate::metrics::log_histogram::HistogramSnapshot;

/// Buckets of a histogram of raw values.
const VALUE_BUCKETS: usize = 30;

/// One value at one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub step: u64,
    pub wall_time: f64,
    pub kind: PointKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PointKind {
    Scalar {
        tag: String,
        value: f64,
    },
    /// A histogram of these values (returns of an interval).
    Values {
        tag: String,
        values: Vec<f64>,
    },
    /// A histogram of integer buckets (policy lag of an interval).
    Buckets {
        tag: String,
        snapshot: HistogramSnapshot,
    },
    Text {
        tag: String,
        text: String,
    },
    /// This writer starts at `step`: what an earlier one wrote after it is
    /// orphaned (see [`SessionLog`]).
    Start,
}

impl Point {
    /// The point as an event; `None` for an empty histogram.
    pub fn to_event(&self) -> Option<Event> {
        let value = |tag: &str, metadata, value| {
            What::Summary(Summary {
                value: vec![SummaryValue {
                    tag: tag.to_owned(),
                    metadata,
                    value: Some(value),
                }],
            })
        };
        let what = match &self.kind {
            PointKind::Scalar { tag, value: v } => value(tag, None, Value::SimpleValue(*v as f32)),
            PointKind::Values { tag, values } => value(tag, None, Value::Histo(of_values(values)?)),
            PointKind::Buckets { tag, snapshot } => {
                value(tag, None, Value::Histo(of_buckets(snapshot)?))
            }
            PointKind::Text { tag, text } => value(
                tag,
                Some(SummaryMetadata {
                    plugin_data: Some(PluginData {
                        plugin_name: "text".into(),
                    }),
                }),
                Value::Tensor(TensorProto {
                    dtype: DT_STRING,
                    tensor_shape: Some(TensorShapeProto {}),
                    string_val: vec![text.as_bytes().to_vec()],
                }),
            ),
            PointKind::Start => What::SessionLog(SessionLog {
                status: SESSION_START,
            }),
        };
        Some(Event {
            wall_time: self.wall_time,
            step: self.step.min(i64::MAX as u64) as i64,
            what: Some(what),
        })
    }
}

/// A histogram of `values` in [`VALUE_BUCKETS`] equal buckets between
/// their least and greatest (non-finite values left out).
fn of_values(values: &[f64]) -> Option<HistogramProto> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let min = finite.iter().copied().reduce(f64::min)?;
    let max = finite.iter().copied().reduce(f64::max)?;
    let width = (max - min) / VALUE_BUCKETS as f64;
    let (bucket_limit, mut bucket) = if width > 0.0 {
        let limits: Vec<f64> = (1..=VALUE_BUCKETS)
            .map(|i| min + width * i as f64)
            .collect();
        (limits, vec![0.0; VALUE_BUCKETS])
    } else {
        (vec![max], vec![0.0])
    };
    for &v in &finite {
        let i = bucket_limit
            .iter()
            .position(|&limit| v <= limit)
            .unwrap_or(bucket.len() - 1);
        bucket[i] += 1.0;
    }
    Some(HistogramProto {
        min,
        max,
        num: finite.len() as f64,
        sum: finite.iter().sum(),
        sum_squares: finite.iter().map(|v| v * v).sum(),
        bucket_limit,
        bucket,
    })
}

/// A log histogram's non-empty buckets, each at its upper bound.
fn of_buckets(s: &HistogramSnapshot) -> Option<HistogramProto> {
    let buckets: Vec<(u64, u64)> = s.buckets().filter(|&(_, c)| c > 0).collect();
    let (&(first, _), &(last, _)) = (buckets.first()?, buckets.last()?);
    let squares: f64 = buckets
        .iter()
        .map(|&(upper, c)| (upper as f64) * (upper as f64) * c as f64)
        .sum();
    Some(HistogramProto {
        min: first as f64,
        max: last as f64,
        num: s.count() as f64,
        sum: s.sum() as f64,
        // From the bucket bounds: exact for values up to 16.
        sum_squares: squares,
        bucket_limit: buckets.iter().map(|&(upper, _)| upper as f64).collect(),
        bucket: buckets.iter().map(|&(_, c)| c as f64).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::log_histogram::LogHistogram;

    #[test]
    fn values_fill_equal_buckets_between_their_bounds() {
        let h = of_values(&[0.0, 1.0, 2.0, 3.0, f64::NAN, 30.0]).unwrap();
        assert_eq!((h.min, h.max, h.num), (0.0, 30.0, 5.0));
        assert_eq!(h.sum, 36.0);
        assert_eq!(h.bucket_limit.len(), VALUE_BUCKETS);
        assert_eq!(*h.bucket_limit.last().unwrap(), 30.0);
        assert_eq!(h.bucket.iter().sum::<f64>(), 5.0);
        // (0, 1]: 0 and 1; (1, 2]: 2; (2, 3]: 3; the last: 30.
        assert_eq!(&h.bucket[..3], &[2.0, 1.0, 1.0]);
        assert_eq!(*h.bucket.last().unwrap(), 1.0);
        let one = of_values(&[5.0, 5.0]).unwrap();
        assert_eq!((one.bucket_limit, one.bucket), (vec![5.0], vec![2.0]));
        assert!(of_values(&[]).is_none() && of_values(&[f64::INFINITY]).is_none());
    }

    #[test]
    fn log_buckets_keep_small_integers_exact() {
        let lags = LogHistogram::new();
        for lag in [0, 1, 1, 3, 3, 3] {
            lags.record(lag);
        }
        let h = of_buckets(&lags.snapshot()).unwrap();
        assert_eq!(h.bucket_limit, vec![0.0, 1.0, 3.0]);
        assert_eq!(h.bucket, vec![1.0, 2.0, 3.0]);
        assert_eq!((h.min, h.max, h.num, h.sum), (0.0, 3.0, 6.0, 11.0));
        assert!(of_buckets(&LogHistogram::new().snapshot()).is_none());
    }

    #[test]
    fn text_is_a_scalar_string_tensor_for_the_text_plugin() {
        let e = Point {
            step: 7,
            wall_time: 1.0,
            kind: PointKind::Text {
                tag: "run/config".into(),
                text: "[run]".into(),
            },
        }
        .to_event()
        .unwrap();
        let Some(What::Summary(s)) = e.what else {
            panic!("a summary")
        };
        let v = &s.value[0];
        assert_eq!(
            v.metadata
                .as_ref()
                .unwrap()
                .plugin_data
                .as_ref()
                .unwrap()
                .plugin_name,
            "text"
        );
        let Some(Value::Tensor(t)) = &v.value else {
            panic!("a tensor")
        };
        assert_eq!((t.dtype, &t.string_val[0][..]), (DT_STRING, &b"[run]"[..]));
    }
}
