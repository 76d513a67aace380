// Evaluates SQL92 selectors with Apache RocketMQ's own filter classes (compiled from its
// 4.9.8 sources by tests/interop/test_interop_sql92_java.py) for the differential test.
//
// stdin: one case per line, tab-separated hex of UTF-8: the expression, then property name,
// value, name, value ...; stdout: one line per case: PARSE_ERROR, TRUE, FALSE, NULL, OTHER
// (a non-boolean result) or ERROR (evaluation threw).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import org.apache.rocketmq.filter.expression.EvaluationContext;
import org.apache.rocketmq.filter.expression.Expression;
import org.apache.rocketmq.filter.parser.SelectorParser;

public class SelectorCheck {
    private static String fromHex(String hex) {
        byte[] bytes = new byte[hex.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] fields = line.split("\t", -1);
            final Map<String, String> props = new HashMap<>();
            for (int i = 1; i + 1 < fields.length; i += 2) {
                props.put(fromHex(fields[i]), fromHex(fields[i + 1]));
            }
            Expression expression;
            try {
                expression = SelectorParser.parse(fromHex(fields[0]));
            } catch (Throwable t) {
                out.append("PARSE_ERROR\n");
                continue;
            }
            EvaluationContext context = new EvaluationContext() {
                public Object get(String name) {
                    return props.get(name);
                }

                public Map<String, Object> keyValues() {
                    return null;
                }
            };
            String verdict;
            try {
                Object result = expression.evaluate(context);
                if (result == null) {
                    verdict = "NULL";
                } else if (result instanceof Boolean) {
                    verdict = ((Boolean) result) ? "TRUE" : "FALSE";
                } else {
                    verdict = "OTHER";
                }
            } catch (Throwable t) {
                verdict = "ERROR";
            }
            out.append(verdict).append('\n');
        }
        System.out.print(out);
    }
}
